import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism, constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { Config } from '../core/config.ts';
import { tookTooLong, unavailable, type DecoderOutcome } from './decoder-outcome.ts';

/**
 * HEIC with the system's libheif (Debian's libheif1 and libde265): images/heif-decode.c, built by
 * tools/scripts/heic-decoder.ts. 2-3× faster than libheif's WASM build (bench/heic-decode.ts),
 * which stays as the fallback where it is missing.
 *
 * Processes, not an addon in ours: libde265 has had a long line of memory-safety bugs, and a crash,
 * a hang or a runaway allocation on a hostile file must end a child, never the API or the worker.
 * A heif-decode server is started once per decode slot and kept; it forks a fresh child for each
 * image, which caps its own memory from the size the file declares. Forking this process instead,
 * once per image, would cost about 0.1 ms per megabyte it holds (30 ms at 300 MB) before a pixel
 * is decoded. This side kills the server, and with it the child, at the timeout or when nobody
 * waits for the decode any more, and takes exactly the bytes the child's header announces.
 */

/** What `heif-decode --version` must announce (images/heif-decode.c, PROTOCOL). */
export const HEIF_DECODE_PROTOCOL = 3;
export const HEIF_DECODE_SOURCE = fileURLToPath(new URL('./heif-decode.c', import.meta.url));
/**
 * Where `npm run heic-decoder` builds it, and where it is looked for unless HEIC_DECODER_PATH says:
 * one binary per protocol, so checkouts that share node_modules (git worktrees) at different
 * protocols do not rebuild it from under each other.
 */
export const DEFAULT_HEIF_DECODE_PATH = fileURLToPath(new URL(`../node_modules/.cache/lenstack/heif-decode-${HEIF_DECODE_PROTOCOL}`, import.meta.url));
export const BUILD_HINT = '`npm run heic-decoder` builds it (needs Debian\'s gcc and libheif-dev)';

/** libheif decodes a HEIC's tiles on this many threads (a 2566×3313 iPhone photo has 42 of them). */
const THREADS = Math.min(4, availableParallelism());
/** `--version` answers at once; this is for a binary that does not. */
const PROBE_TIMEOUT_MS = 5_000;
/** What is kept of the child's stderr: its one line of reason. */
const STDERR_KEEP = 2_000;
/** Pixels' header: "RGB8", width, height. */
const HEADER_BYTES = 12;
/** Control frames: type, payload length. */
const FRAME_HEADER_BYTES = 5;

/**
 * What a request asks the child to decode: the HEIC's primary image, or its embedded thumbnail
 * that is fit to fingerprint it (images/heif-decode.c, fingerprint_thumbnail; docs/decisions.md,
 * "The fingerprint of a HEIC"), answered `no-thumbnail` without decoding anything when none fits.
 */
export type HeifWant = 'primary' | 'thumbnail';
/** The request's "what it wants" field (images/heif-decode.c, WANT_*). */
const WANT: Record<HeifWant, number> = { primary: 0, thumbnail: 1 };

export type HeicDecoderSetting = Config['HEIC_DECODER'];

export type HeicDecoder =
  | { backend: 'native'; path: string; libheif: string }
  | { backend: 'wasm'; why: string };

let setting: { mode: HeicDecoderSetting; path: string } = { mode: 'auto', path: DEFAULT_HEIF_DECODE_PATH };
let chosen: Promise<HeicDecoder> | undefined;
/** heif-decode servers waiting for their next image (at most one per decode slot is ever busy). */
const idle: Server[] = [];

/**
 * Sets this process's HEIC decoder from its config (HEIC_DECODER, HEIC_DECODER_PATH) and detects
 * it. Detection runs once per setting: `auto` takes the native decoder when it answers and the
 * WASM build otherwise, `native` rejects when the native one is missing, `wasm` forces the fallback.
 */
export function configureHeicDecoder(config: Pick<Config, 'HEIC_DECODER' | 'HEIC_DECODER_PATH'>): Promise<HeicDecoder> {
  const next = { mode: config.HEIC_DECODER, path: config.HEIC_DECODER_PATH ?? DEFAULT_HEIF_DECODE_PATH };
  if (next.mode !== setting.mode || next.path !== setting.path) {
    // Servers of another binary are not taken again (takeIdle); of this one, they stay for its next image.
    if (next.path !== setting.path) for (const server of idle.splice(0)) server.stop();
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
 * Decodes one HEIC with a heif-decode server (an idle one, or one started for it). Resolves with
 * the outcome; rejects only with the signal's reason when every caller went away.
 */
export function decodeHeifNative(
  path: string,
  bytes: Buffer,
  maxPixels: number,
  opts: { timeoutMs: number; signal?: AbortSignal; want?: HeifWant },
): Promise<DecoderOutcome> {
  const { signal, timeoutMs } = opts;
  if (signal?.aborted) return Promise.reject(signal.reason);
  const server = takeIdle(path) ?? new Server(path);
  return new Promise<DecoderOutcome>((resolve, reject) => {
    let settled = false;
    const finish = (keepServer: boolean, fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', gone);
      if (keepServer && setting.path === path) idle.push(server.done());
      else server.stop();
      fn();
    };
    const answer = (outcome: DecoderOutcome, keepServer = false) => finish(keepServer, () => resolve(outcome));
    // Every caller of this decode went away: the server and its child are ended, the core goes back to the others.
    const gone = () => finish(false, () => reject(signal!.reason));
    signal?.addEventListener('abort', gone, { once: true });
    const timer = setTimeout(() => answer(tookTooLong(timeoutMs)), timeoutMs);

    let width = 0;
    let height = 0;
    let pixels: Buffer | undefined;
    let received = 0;
    let status: number | undefined;
    let reason = '';
    const header = Buffer.alloc(HEADER_BYTES);
    // Decoded only when the child both ended well and delivered every byte it announced, in either order.
    const complete = () => {
      if (status === 0 && pixels && received === HEADER_BYTES + pixels.length) answer({ ok: true, width, height, pixels }, true);
    };
    server.start({
      pixels(chunk) {
        const start = Math.max(0, HEADER_BYTES - received);
        if (start > 0) {
          chunk.copy(header, received, 0, start);
          received += Math.min(start, chunk.length);
          if (received < HEADER_BYTES) return;
          width = header.readUInt32LE(4);
          height = header.readUInt32LE(8);
          // Memory is taken for what the header announces, and only within the caller's limit.
          if (header.toString('latin1', 0, 4) !== 'RGB8' || width === 0 || height === 0 || width * height > maxPixels) {
            answer({ ok: false, reason: 'failed', message: `heif-decode answered a malformed header (${width}×${height})` });
            return;
          }
          pixels = Buffer.allocUnsafe(width * height * 3);
        }
        if (received - HEADER_BYTES + chunk.length - start > pixels!.length) {
          answer({ ok: false, reason: 'failed', message: `heif-decode wrote more than the ${width}×${height} pixels it announced` });
          return;
        }
        received += chunk.copy(pixels!, received - HEADER_BYTES, start);
        complete();
      },
      message(text) {
        reason = text;
      },
      ended(code) {
        status = code;
        if (code === 0) return complete();
        // A child writes pixels only once it has decoded them all: one that ended otherwise wrote none,
        // unless something is wrong with it, and then its server goes too.
        const clean = received === 0;
        if (code === 2 || code === 4) answer({ ok: false, reason: 'invalid', message: reason || 'HEIF could not be decoded' }, clean);
        else if (code === 3) answer({ ok: false, reason: 'too-large', message: reason || `Image is over the ${maxPixels}-pixel limit` }, clean);
        // Only an answer to a thumbnail request: the caller decodes the primary image instead.
        else if (code === 5 && opts.want === 'thumbnail') answer({ ok: false, reason: 'no-thumbnail', message: reason || 'HEIF has no thumbnail fit to fingerprint it' }, clean);
        else if (code > 0) answer({ ok: false, reason: 'failed', message: reason || `heif-decode exited with code ${code}` }, clean);
        else {
          const name = signalName(-code);
          // Not ours (ours end the server first): the machine's OOM killer or an operator. Nothing to blame the image for.
          if (name === 'SIGKILL' || name === 'SIGTERM') answer(unavailable(`Image decoder was stopped (${name})`, 2));
          // A crash on these bytes happens again on the same bytes: the file is refused, not retried.
          else answer({ ok: false, reason: 'invalid', message: `HEIF could not be decoded: the decoder crashed on this file (${name}); refused as malformed` });
        }
      },
      failed(message) {
        answer(unavailable(message, 2));
      },
    });
    server.send(bytes, maxPixels, opts.want ?? 'primary');
  });
}

function takeIdle(path: string): Server | undefined {
  while (idle.length > 0) {
    const server = idle.pop()!;
    if (server.path === path && server.alive) return server;
    server.stop();
  }
  return undefined;
}

const signalName = (n: number): string => Object.entries(constants.signals).find(([, v]) => v === n)?.[0] ?? `signal ${n}`;

interface Listener {
  /** A chunk of the child's stdout: the pixels' header, then the pixels. */
  pixels(chunk: Buffer): void;
  /** The child's reason for refusing or failing. */
  message(text: string): void;
  /** The child ended: its exit status, or minus the signal that ended it. */
  ended(status: number): void;
  /** The server itself could not start or stopped. */
  failed(message: string): void;
}

/** One `heif-decode --serve` process and its pipes; one image at a time. */
class Server {
  readonly #child: ChildProcess;
  #listener: Listener | null = null;
  #control = Buffer.alloc(0);
  #stderr = '';
  alive = true;

  constructor(readonly path: string) {
    // No environment: nothing of ours (VIPSHOME, secrets) reaches a process that reads hostile bytes.
    this.#child = spawn(path, ['--serve'], { stdio: ['pipe', 'pipe', 'pipe', 'pipe'], env: {} });
    // An idle server keeps nothing alive: when this process ends, its stdin closes and it ends too.
    this.#child.unref();
    for (const stream of this.#child.stdio) (stream as (Readable & { unref?: () => void }) | null)?.unref?.();
    this.#child.stdout!.on('data', (chunk: Buffer) => this.#listener?.pixels(chunk));
    (this.#child.stdio[3] as Readable).on('data', (chunk: Buffer) => this.#frames(chunk));
    this.#child.stderr!.on('data', (d: Buffer) => (this.#stderr = (this.#stderr + d.toString()).slice(-STDERR_KEEP)));
    // Broken pipes show up as the server's exit below.
    this.#child.stdin!.on('error', () => undefined);
    this.#child.once('error', (err) => this.#gone(`Image decoder could not start: ${err.message}`));
    this.#child.once('exit', (code, signal) => this.#gone(`Image decoder stopped (${signal ?? `exit code ${code}`}) ${this.#stderr.trim()}`.trim()));
  }

  start(listener: Listener): void {
    this.#listener = listener;
  }

  send(bytes: Buffer, maxPixels: number, want: HeifWant): void {
    const request = Buffer.alloc(24);
    request.write('HDEC', 0, 'latin1');
    request.writeUInt32LE(bytes.length, 4);
    request.writeUInt32LE(THREADS, 8);
    request.writeUInt32LE(WANT[want], 12);
    request.writeBigUInt64LE(BigInt(maxPixels), 16);
    (this.#child.stdin as Writable).write(request);
    (this.#child.stdin as Writable).write(bytes);
  }

  /** Back to idle. */
  done(): this {
    this.#listener = null;
    return this;
  }

  stop(): void {
    this.alive = false;
    this.#listener = null;
    // Its child goes with it (PR_SET_PDEATHSIG).
    this.#child.kill('SIGKILL');
  }

  #frames(chunk: Buffer): void {
    this.#control = Buffer.concat([this.#control, chunk]);
    while (this.#control.length >= FRAME_HEADER_BYTES) {
      const length = this.#control.readUInt32LE(1);
      if (this.#control.length < FRAME_HEADER_BYTES + length) return;
      const type = String.fromCharCode(this.#control[0]!);
      const payload = this.#control.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length);
      this.#control = this.#control.subarray(FRAME_HEADER_BYTES + length);
      if (type === 'M') this.#listener?.message(payload.toString('utf8'));
      else if (type === 'X' && length === 4) this.#listener?.ended(payload.readInt32LE(0));
    }
  }

  #gone(message: string): void {
    this.alive = false;
    this.#listener?.failed(message);
  }
}
