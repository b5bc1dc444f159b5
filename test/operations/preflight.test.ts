import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEIF_DECODE_PATH } from '../../images/heic-native.ts';
import { OASDIFF } from '../../tools/scripts/oasdiff.ts';
import { formatMissing, preflight } from '../../tools/scripts/preflight.ts';
import { PROMTOOL } from '../../tools/scripts/promtool.ts';
import { STRIPE_MOCK } from '../../tools/scripts/stripe-mock.ts';

/**
 * The one preflight `npm test` runs before any build (test/harness/global-setup.ts): everything a
 * fresh machine lacks, listed together with the command that installs each.
 */
const ALL = { browser: true, goTools: [STRIPE_MOCK, OASDIFF, PROMTOOL], temporal: true, testPrograms: true, heicDecoder: DEFAULT_HEIF_DECODE_PATH };

describe('preflight', () => {
  it('finds nothing missing on a machine set up as .ci/run sets it up (this one)', async () => {
    expect(await preflight(ALL)).toEqual([]);
  });

  it('on a bare machine, lists every missing thing at once with its install command', async () => {
    const home = await mkdtemp(join(tmpdir(), 'lenstack-preflight-'));
    try {
      // Nothing on PATH, no caches in HOME, no Chromium where it is looked for, no Temporal CLI, no
      // native HEIC decoder built (and no compiler on PATH to build it; libheif's headers are on this machine).
      const bare = { PATH: '', HOME: home, CHROMIUM_PATH: join(home, 'chromium') };
      const missing = await preflight({ ...ALL, heicDecoder: join(home, 'heif-decode') }, bare);
      expect(missing.map((m) => m.what)).toEqual(['perl', `Chromium (${join(home, 'chromium')})`, 'curl', 'script (util-linux)', 'gcc', 'Go']);
      expect(missing.find((m) => m.what === 'Go')!.why).toBe('to build the Temporal CLI, stripe-mock, oasdiff, promtool once (cached in ~/.cache/lenstack)');
      const report = formatMissing(missing);
      for (const command of ['apt-get install -y perl', 'apt-get install -y chromium', 'apt-get install -y curl', 'apt-get install -y bsdutils', 'apt-get install -y gcc libheif-dev', 'https://go.dev/dl']) expect(report).toContain(command);
      expect(report.split('\n')[0]).toBe('This machine lacks 6 things the run needs:');
      // What the run does not need is not asked for.
      expect((await preflight({ browser: false, goTools: [], temporal: false, testPrograms: false }, bare)).map((m) => m.what)).toEqual(['perl']);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
