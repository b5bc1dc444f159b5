/**
 * Builds the native HEIC decoder (images/heif-decode.c) against the system's libheif, once per
 * source: `npm start`, the test harness and .ci/run call it; the Dockerfile runs it in a build stage.
 * Needs a C compiler and libheif's headers (Debian: `apt-get install gcc libheif-dev`); at run time
 * only libheif1. Without them nothing fails here: HEICs are decoded by libheif's WASM build.
 *
 *   npx tsx tools/scripts/heic-decoder.ts [--out PATH]   # prints the binary's path, building it if needed
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { DEFAULT_HEIF_DECODE_PATH, HEIF_DECODE_SOURCE, probe } from '../../images/heic-native.ts';
import { withBuildLock } from './go-tool.ts';
import { isMain } from './is-main.ts';

/** The one place the decoder's compile command is written. */
const COMPILE = (out: string) => ['cc', ['-O2', '-Wall', '-Wextra', '-pthread', '-o', out, HEIF_DECODE_SOURCE, '-lheif']] as const;

export class HeicDecoderUnavailable extends Error {
  override name = 'HeicDecoderUnavailable';
}

/**
 * The path of a working heif-decode built from the current source, building it when it is missing
 * or older (a `.source-sha256` stamp beside it names the source it was built from).
 */
export async function ensureHeicDecoder(opts: { out?: string; log?: (line: string) => void } = {}): Promise<string> {
  const out = opts.out ?? DEFAULT_HEIF_DECODE_PATH;
  const log = opts.log ?? ((line: string) => process.stderr.write(`[heic-decoder] ${line}\n`));
  const source = await readFile(HEIF_DECODE_SOURCE);
  const [cmd, args] = COMPILE(out);
  const wanted = createHash('sha256').update(source).update(args.join(' ')).digest('hex');
  const stamp = `${out}.source-sha256`;
  const current = async () => (await readFile(stamp, 'utf8').catch(() => '')) === wanted && 'libheif' in (await probe(out));
  if (await current()) return out;
  await withBuildLock(dirname(out), async () => {
    if (await current()) return;
    // Into a private file, then renamed into place: a process starting it meanwhile never sees half a binary.
    const tmp = `${out}.build-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      const [, tmpArgs] = COMPILE(tmp);
      const t0 = Date.now();
      const { code, output } = await run(cmd, [...tmpArgs]);
      if (code !== 0) throw new HeicDecoderUnavailable(why(code, output));
      const found = await probe(tmp);
      if (!('libheif' in found)) throw new HeicDecoderUnavailable(`built, but it does not run: ${found.missing}`);
      await rename(tmp, out);
      await writeFile(stamp, wanted);
      log(`built ${out} against libheif ${found.libheif} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      await rm(tmp, { force: true });
    }
  }, log);
  return out;
}

function why(code: number | null, output: string): string {
  if (code === null) return 'no C compiler (cc): apt-get install gcc';
  if (/libheif\/heif\.h/.test(output)) return "libheif's headers are missing: apt-get install libheif-dev";
  return `cc failed (exit ${code}): ${output.trim().slice(-1_000)}`;
}

/** Exit code null when the command could not start at all (no such program). */
function run(cmd: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', (err) => resolve({ code: null, output: err.message }));
    child.once('close', (code) => resolve({ code, output }));
  });
}

if (isMain(import.meta.url)) {
  const at = process.argv.indexOf('--out');
  try {
    console.log(await ensureHeicDecoder(at > 0 && process.argv[at + 1] ? { out: process.argv[at + 1]! } : {}));
  } catch (err) {
    if (!(err instanceof HeicDecoderUnavailable)) throw err;
    console.error(`[heic-decoder] not built: ${err.message}. HEICs will be decoded by libheif's WASM build.`);
    process.exitCode = 1;
  }
}
