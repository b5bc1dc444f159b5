import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Config } from '../core/config.ts';
import { tookTooLong, unavailable, type DecoderOutcome } from './decoder-outcome.ts';

/**
 * HEIC with the system's libheif (Debian's libheif1 and libde265): images/heif-decode.c, built by
 * tools/scripts/heic-decoder.ts, run once per image as a process of its own. 3-4× faster than
 * libheif's WASM build (bench/heic-decode.ts), which stays as the fallback where it is missing.
 *
 * A process, not an addon in ours: libde265 has had a long line of memory-safety bugs, and a crash,
 * a hang or a runaway allocation on a hostile file must end a child, never the API or the worker.
 * The child caps its own memory from the size the file declares; this side kills it at the
 * timeout or when nobody waits for it any more, and takes exactly the bytes its header announces.
 */

/** What `heif-decode --version` must announce (images/heif-decode.c, PROTOCOL). */
export const HEIF_DECODE_PROTOCOL = 1;
export const HEIF_DECODE_SOURCE = fileURLToPath(new URL('./heif-decode.c', import.meta.url));
/** Where `npm run heic-decoder` builds it, and where it is looked for unless HEIC_DECODER_PATH says. */
export const DEFAULT_HEIF_DECODE_PATH = fileURLToPath(new URL('../node_modules/.cache/lenstack/heif-decode', import.meta.url));
export const BUILD_HINT = '`npm run heic-decoder` builds it (needs Debian\'s gcc and libheif-dev)';

/** libheif decodes a HEIC's tiles on this many threads (a 2566×3313 iPhone photo has 42 of them). */
const THREADS = Math.min(4, availableParallelism());
/** `--version` answers at once; this is for a binary that does not. */
const PROBE_TIMEOUT_MS = 5_000;
/** What is kept of the child's stderr: its one line of reason. */
const STDERR_KEEP = 2_000;
const HEADER_BYTES = 12;

export type HeicDecoderSetting = Config['HEIC_DECODER'];

export type HeicDecoder =
  | { backend: 'native'; path: string; libheif: string }
  | { backend: 'wasm'; why: string };

let setting: { mode: HeicDecoderSetting; path: string } = { mode: 'auto', path: DEFAULT_HEIF_DECODE_PATH };
let chosen: Promise<HeicDecoder> | undefined;

/**
 * Sets this process's HEIC decoder from its config (HEIC_DECODER, HEIC_DECODER_PATH) and detects
 * it. Detection runs once per setting: `auto` takes the native decoder when it answers and the
 * WASM build otherwise, `native` rejects when the native one is missing, `wasm` forces the fallback.
 */
export function configureHeicDecoder(config: Pick<Config, 'HEIC_DECODER' | 'HEIC_DECODER_PATH'>): Promise<HeicDecoder> {
  const next = { mode: config.HEIC_DECODER, path: config.HEIC_DECODER_PATH ?? DEFAULT_HEIF_DECODE_PATH };
  if (next.mode !== setting.mode || next.path !== setting.path) {
    setting = next;
    chosen = undefined;
  }
  return heicDecoder();
}

/** The decoder HEICs go to in this process (`auto` at the default path unless configured). */
export function heicDecoder(): Promise<HeicDecoder> {
  chosen ??= choose(setting);
  return chosen;
}

/** The one log line a process writes about its choice: a warning when the native decoder was wanted but is missing. */
export function heicDecoderNotice(decoder: HeicDecoder): { level: 'info' | 'warn'; message: string } {
  if (decoder.backend === 'native') return { level: 'info', message: `HEIC decoding: native libheif ${decoder.libheif} (${decoder.path})` };
  const message = `HEIC decoding: libheif's WASM build, several times slower than the native decoder (${decoder.why})`;
  return { level: setting.mode === 'wasm' ? 'info' : 'warn', message };
}

async function choose({ mode, path }: typeof setting): Promise<HeicDecoder> {
  if (mode === 'wasm') return { backend: 'wasm', why: 'HEIC_DECODER=wasm' };
  const found = await probe(path);
  if ('libheif' in found) return { backend: 'native', path, libheif: found.libheif };
  if (mode === 'native') throw new Error(`HEIC_DECODER=native, but ${found.missing}`);
  return { backend: 'wasm', why: found.missing };
}

/** Runs `heif-decode --version`: the binary is there, starts (its libheif loads) and speaks our protocol. */
export function probe(path: string): Promise<{ libheif: string } | { missing: string }> {
  return new Promise((resolve) => {
    const missing = (why: string) => resolve({ missing: `no native HEIC decoder at ${path} (${why}); ${BUILD_HINT}` });
    let out = '';
    const child = spawn(path, ['--version'], { stdio: ['ignore', 'pipe', 'pipe'], env: {}, timeout: PROBE_TIMEOUT_MS });
    child.stdout.on('data', (d: Buffer) => (out = (out + d.toString()).slice(0, 500)));
    child.stderr.on('data', (d: Buffer) => (out = (out + d.toString()).slice(0, 500)));
    child.once('error', (err: NodeJS.ErrnoException) => missing(err.code === 'ENOENT' ? 'not built' : err.message));
    child.once('close', (code, signal) => {
      const m = /^heif-decode protocol (\d+) libheif (\S+)$/m.exec(out);
      if (code !== 0 || !m) missing(`it did not start: ${signal ?? `exit ${code}`} ${out.trim()}`.trim());
      else if (Number(m[1]) !== HEIF_DECODE_PROTOCOL) missing(`built from an older source: protocol ${m[1]}, not ${HEIF_DECODE_PROTOCOL}`);
      else resolve({ libheif: m[2]! });
    });
  });
}

/**
 * Decodes one HEIC in a heif-decode process of its own. Resolves with the outcome; rejects only
 * with the signal's reason when every caller went away (the child is killed then).
 */
export function decodeHeifNative(path: string, bytes: Buffer, maxPixels: number, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<DecoderOutcome> {
  const { signal, timeoutMs } = opts;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<DecoderOutcome>((resolve, reject) => {
    let settled = false;
    let child: ChildProcess | undefined;
    let timer: NodeJS.Timeout | undefined;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', gone);
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      fn();
    };
    const answer = (outcome: DecoderOutcome) => finish(() => resolve(outcome));
    // Every caller of this decode went away: its core goes back to the others.
    const gone = () => finish(() => reject(signal!.reason));
    signal?.addEventListener('abort', gone, { once: true });
    timer = setTimeout(() => answer(tookTooLong(timeoutMs)), timeoutMs);

    // No environment: nothing of ours (VIPSHOME, secrets) reaches a process that reads hostile bytes.
    child = spawn(path, [String(maxPixels), String(THREADS)], { stdio: ['pipe', 'pipe', 'pipe'], env: {} });
    child.once('error', (err) => answer(unavailable(`Image decoder could not start: ${err.message}`, 2)));
    // The child stops reading when it refuses a file early: its exit says why, not the broken pipe.
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(bytes);

    const header = Buffer.alloc(HEADER_BYTES);
    let headerBytes = 0;
    let pixels: Buffer | undefined;
    let pixelBytes = 0;
    let width = 0;
    let height = 0;
    child.stdout!.on('data', (chunk: Buffer) => {
      if (settled) return;
      let at = 0;
      if (headerBytes < HEADER_BYTES) {
        at = chunk.copy(header, headerBytes, 0, HEADER_BYTES - headerBytes);
        headerBytes += at;
        if (headerBytes < HEADER_BYTES) return;
        width = header.readUInt32LE(4);
        height = header.readUInt32LE(8);
        // Memory is taken for what the header announces, and only within the caller's limit.
        if (header.toString('latin1', 0, 4) !== 'RGB8' || width === 0 || height === 0 || width * height > maxPixels) {
          answer({ ok: false, reason: 'failed', message: `heif-decode answered a malformed header (${width}×${height})` });
          return;
        }
        pixels = Buffer.allocUnsafe(width * height * 3);
      }
      if (pixelBytes + chunk.length - at > pixels!.length) {
        answer({ ok: false, reason: 'failed', message: `heif-decode wrote more than the ${width}×${height} pixels it announced` });
        return;
      }
      pixelBytes += chunk.copy(pixels!, pixelBytes, at);
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(0, STDERR_KEEP)));

    child.once('close', (code, killedBy) => {
      const why = stderr.trim().split('\n')[0] ?? '';
      if (code === 0) {
        if (pixels && pixelBytes === pixels.length) answer({ ok: true, width, height, pixels });
        else answer({ ok: false, reason: 'failed', message: `heif-decode ended after ${pixelBytes} of ${width * height * 3} pixel bytes` });
      } else if (code === 2 || code === 4) answer({ ok: false, reason: 'invalid', message: why || 'HEIF could not be decoded' });
      else if (code === 3) answer({ ok: false, reason: 'too-large', message: why || `Image is over the ${maxPixels}-pixel limit` });
      else if (killedBy === 'SIGKILL' || killedBy === 'SIGTERM') {
        // Not ours (ours settle first): the machine's OOM killer or an operator. Nothing to blame the image for.
        answer(unavailable(`Image decoder was stopped (${killedBy})`, 2));
      } else if (killedBy) {
        // A crash on these bytes happens again on the same bytes: the file is refused, not retried.
        answer({ ok: false, reason: 'invalid', message: `HEIF could not be decoded: the decoder crashed on this file (${killedBy}); refused as malformed` });
      } else answer({ ok: false, reason: 'failed', message: why || `heif-decode exited with code ${code}` });
    });
  });
}
