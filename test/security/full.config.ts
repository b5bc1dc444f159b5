import { defineConfig } from 'vitest/config';
import base from '../../vitest.config.ts';

/**
 * The security suites at full size (`npx vitest run --config test/security/full.config.ts`): the
 * revocation race runs 500 rounds instead of the 25 of `npm test`. Same harness as `npm test`.
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/security/**/*.test.ts'],
    provide: { hostileScale: 'full' },
    maxWorkers: 1,
    testTimeout: 10 * 60_000,
  },
});
