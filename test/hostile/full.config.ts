import { defineConfig } from 'vitest/config';
import base from '../../vitest.config.ts';

/**
 * `npm run hostile`: the hostile suites (SSRF corpus, image corpus, OpenAPI request fuzzer) at
 * full size, with the same harness as `npm test` (which runs them reduced). Sizes: sizes.ts.
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/hostile/**/*.test.ts'],
    provide: { hostileScale: 'full' },
    // The full corpora take minutes; one file at a time keeps the API's memory figures clean.
    maxWorkers: 1,
    testTimeout: 20 * 60_000,
    hookTimeout: 5 * 60_000,
  },
});
