import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { promisify } from 'node:util';
import { describe, expect, test } from 'vitest';
import {
  ensureTemporalCli,
  isChecksumDbUnreachable,
  TEMPORAL_CLI_VERSION,
  temporalCliLocation,
} from '../../tools/scripts/temporal-cli.ts';

const run = promisify(execFile);

describe('ensureTemporalCli', () => {
  test('returns the cached pinned build: an executable that prints version 1.5.1', async () => {
    const { TEMPORAL_CLI: _override, ...env } = process.env;
    const path = await ensureTemporalCli({ env });
    expect(path).toBe(temporalCliLocation(env).cachedPath);
    await access(path, constants.X_OK);
    const { stdout } = await run(path, ['--version']);
    expect(TEMPORAL_CLI_VERSION).toBe('1.5.1');
    expect(stdout).toMatch(/^temporal version 1\.5\.1 \(Server \d+\.\d+\.\d+/);
  });

  test('TEMPORAL_CLI wins over the cache, and a path that does not run is a clear error', async () => {
    const { cachedPath } = temporalCliLocation({ HOME: '/nonexistent-home' });
    expect(cachedPath).toBe('/nonexistent-home/.cache/lenstack/temporal-1.5.1/temporal');
    expect(temporalCliLocation({ XDG_CACHE_HOME: '/xdg', HOME: '/h' }).cachedPath).toBe(
      '/xdg/lenstack/temporal-1.5.1/temporal',
    );

    const real = await ensureTemporalCli();
    await expect(ensureTemporalCli({ env: { ...process.env, TEMPORAL_CLI: real } })).resolves.toBe(real);
    await expect(
      ensureTemporalCli({ env: { ...process.env, TEMPORAL_CLI: '/nonexistent/temporal' }, log: () => {} }),
    ).rejects.toThrow(/TEMPORAL_CLI=\/nonexistent\/temporal does not run/);
  });
});

describe('isChecksumDbUnreachable', () => {
  test('recognises go failing to reach sum.golang.org (seen on our machines), and nothing else', () => {
    const unreachable =
      'go: github.com/temporalio/cli/cmd/temporal@v1.5.1: github.com/temporalio/cli@v1.5.1: verifying module: ' +
      'github.com/temporalio/cli@v1.5.1: initializing sumdb.Client: checking tree#66398721: ' +
      'Get "https://sum.golang.org/tile/8/3/000.p/3": dial tcp: lookup sum.golang.org on 10.255.255.53:53: no such host';
    expect(isChecksumDbUnreachable(unreachable)).toBe(true);
    expect(
      isChecksumDbUnreachable(
        'verifying github.com/x/y@v1.0.0: checksum mismatch\n\tdownloaded: h1:aaa\n\tsum.golang.org: h1:bbb\n\nSECURITY ERROR',
      ),
    ).toBe(false);
    expect(isChecksumDbUnreachable('go: downloading go.temporal.io/server v1.29.1\n# some/pkg\nundefined: x')).toBe(false);
    expect(isChecksumDbUnreachable('dial tcp: lookup proxy.golang.org: no such host')).toBe(false);
  });
});
