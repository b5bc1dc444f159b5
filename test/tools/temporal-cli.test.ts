import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access, chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, test } from 'vitest';
import {
  ensureTemporalCli,
  isChecksumDbUnreachable,
  TEMPORAL_CLI_VERSION,
  temporalCliLocation,
} from '../../tools/scripts/temporal-cli.ts';

const run = promisify(execFile);

const scratch = await mkdtemp(join(tmpdir(), 'lenstack-temporal-cli-'));
const emptyDir = join(scratch, 'empty');
await mkdir(emptyDir);
afterAll(() => rm(scratch, { recursive: true, force: true }));

/** A directory holding `temporal` as a symlink to `target`, or as a shell script with `body`. */
async function pathDir(name: string, entry: { target: string } | { body: string }): Promise<string> {
  const dir = join(scratch, name);
  await mkdir(dir);
  const file = join(dir, 'temporal');
  if ('target' in entry) await symlink(entry.target, file);
  else {
    await writeFile(file, `#!/bin/sh\n${entry.body}\n`);
    await chmod(file, 0o755);
  }
  return dir;
}

describe('ensureTemporalCli', () => {
  test('returns the cached pinned build: an executable that prints version 1.5.1', async () => {
    // No TEMPORAL_CLI, and a PATH with no temporal on it (go is found by its own fallback path).
    const { TEMPORAL_CLI: _override, ...rest } = process.env;
    const env = { ...rest, PATH: emptyDir };
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

describe('a temporal CLI already installed', () => {
  test('the first temporal 1.x on PATH is used before the cache or a build; TEMPORAL_CLI still wins', async () => {
    const real = await ensureTemporalCli({ env: { ...process.env, PATH: emptyDir }, log: () => {} });
    const installed = await pathDir('installed', { target: real });
    // An empty cache directory: without the PATH lookup this would start a Go build.
    const env = { HOME: join(scratch, 'home'), XDG_CACHE_HOME: join(scratch, 'no-cache'), PATH: [emptyDir, 'relative/dir', installed, '/usr/bin'].join(':') };
    const lines: string[] = [];
    await expect(ensureTemporalCli({ env, log: (l) => lines.push(l) })).resolves.toBe(join(installed, 'temporal'));
    expect(lines).toEqual([]); // the pinned version: nothing to say
    const { stdout } = await run(join(installed, 'temporal'), ['--version']);
    expect(stdout).toMatch(/^temporal version 1\.5\.1 /);

    await expect(ensureTemporalCli({ env: { ...env, TEMPORAL_CLI: real }, log: () => {} })).resolves.toBe(real);
  });

  test('another 1.x release is used with a note; a 0.x one or one that does not run is passed over', async () => {
    const newer = await pathDir('newer', { body: 'echo "temporal version 1.6.0 (Server 1.30.0, UI 2.44.0)"' });
    const old = await pathDir('old', { body: 'echo "temporal version 0.13.2 (server 1.22.0) (ui 2.21.3)"' });
    const broken = await pathDir('broken', { body: 'echo "error while loading shared libraries" >&2; exit 127' });
    const base = { HOME: join(scratch, 'home'), XDG_CACHE_HOME: join(scratch, 'no-cache') };

    const lines: string[] = [];
    const found = await ensureTemporalCli({ env: { ...base, PATH: [old, broken, newer].join(':') }, log: (l) => lines.push(l) });
    expect(found).toBe(join(newer, 'temporal'));
    expect(lines).toEqual([
      `${join(old, 'temporal')} on PATH is version 0.13.2; the dev server needs a 1.x temporal CLI, not using it`,
      `${join(broken, 'temporal')} is on PATH but \`temporal --version\` fails there; not using it`,
      `using ${join(newer, 'temporal')} from PATH (version 1.6.0; tested with 1.5.1)`,
    ]);
  });

  test('with nothing usable on PATH, the cached pinned build is used', async () => {
    const real = await ensureTemporalCli({ env: { ...process.env, PATH: emptyDir }, log: () => {} });
    const old = await pathDir('old-only', { body: 'echo "temporal version 0.10.0"' });
    const { TEMPORAL_CLI: _override, ...rest } = process.env;
    await expect(ensureTemporalCli({ env: { ...rest, PATH: old }, log: () => {} })).resolves.toBe(real);
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
