import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { AppError, imageInvalid, imageTooLarge } from '../core/errors.ts';

/**
 * Decodes the two formats the prebuilt sharp cannot: HEVC-coded HEIF (iPhone HEIC; libvips is built
 * without an HEVC decoder) with libheif's WASM build (libheif-js: libheif + libde265), and BMP with
 * bmp-ts. Only images/open.ts calls this; everything else gets a sharp pipeline from there.
 *
 * Each decode runs in a worker thread of its own, started for it and ended after: an 8.5 MP HEIC
 * takes 0.7 s of CPU on an idle core and 2.5 s on a busy one (bench/heic-decode.ts), which must
 * not stall the event loop; the WASM heap grows to the image and never shrinks, so it goes with
 * the worker; and a decode that runs away is ended by the timeout instead of holding a core.
 */

export type ForeignKind = 'heif' | 'bmp';

export interface DecodedRgb {
  /** Interleaved 8-bit RGB, width × height × 3 bytes, upright (libheif applies irot/imir/clap). */
  pixels: Buffer;
  width: number;
  height: number;
}

/** Decodes at once per process: each holds a core and up to width × height × 7 bytes. */
const MAX_CONCURRENT = 2;
/** Far above the largest accepted image's decode time; a decode still running is ended. */
const DECODE_TIMEOUT_MS = 120_000;

const WORKER_URL = new URL('./foreign-decode.worker.mjs', import.meta.url);

let running = 0;
const waiting: Array<() => void> = [];

async function slot(): Promise<() => void> {
  if (running >= MAX_CONCURRENT) await new Promise<void>((resolve) => waiting.push(resolve));
  running += 1;
  return () => {
    running -= 1;
    waiting.shift()?.();
  };
}

type WorkerAnswer =
  | { ok: true; width: number; height: number; pixels: ArrayBuffer }
  | { ok: false; reason: 'too-large' | 'invalid'; message: string };

/** Refusals this decoder worded itself: final, nothing to learn from decoding again. */
const refusals = new WeakSet<AppError>();
export const isDecoderRefusal = (err: unknown): boolean => err instanceof AppError && refusals.has(err);

function refuse(err: AppError): never {
  refusals.add(err);
  throw err;
}

/**
 * Identical bytes decoding at the same time share one decode (a client retrying an upload, the
 * same photo twice in a request, or analyze and lookup of one photo at once): each costs seconds.
 */
const inFlight = new Map<string, Promise<DecodedRgb>>();

export function decodeForeign(kind: ForeignKind, bytes: Buffer, maxPixels: number): Promise<DecodedRgb> {
  const key = `${kind}:${maxPixels}:${createHash('sha256').update(bytes).digest('hex')}`;
  const running = inFlight.get(key);
  if (running) return running;
  const decode = decodeOnce(kind, bytes, maxPixels).finally(() => inFlight.delete(key));
  inFlight.set(key, decode);
  return decode;
}

async function decodeOnce(kind: ForeignKind, bytes: Buffer, maxPixels: number): Promise<DecodedRgb> {
  const release = await slot();
  try {
    // A timeout or a crashed worker is as final as a refusal: the same bytes would do it again.
    const answer = await runWorker(kind, bytes, maxPixels).catch((err: unknown) => refuse(err instanceof AppError ? err : imageInvalid(String(err))));
    if (!answer.ok) refuse(answer.reason === 'too-large' ? imageTooLarge(answer.message) : imageInvalid(answer.message));
    const pixels = Buffer.from(answer.pixels);
    if (pixels.length !== answer.width * answer.height * 3) refuse(imageInvalid('Image decoded to an unexpected pixel count'));
    return { pixels, width: answer.width, height: answer.height };
  } finally {
    release();
  }
}

function runWorker(kind: ForeignKind, bytes: Buffer, maxPixels: number): Promise<WorkerAnswer> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_URL, { workerData: { kind, bytes: new Uint8Array(bytes), maxPixels } });
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      fn();
    };
    const timer = setTimeout(() => finish(() => reject(imageInvalid(`Image took over ${DECODE_TIMEOUT_MS / 1000} s to decode`))), DECODE_TIMEOUT_MS);
    worker.once('message', (answer: WorkerAnswer) => finish(() => resolve(answer)));
    // A WASM abort (out of memory) or a crash of the worker: the image is refused, the process lives.
    worker.once('error', (err) => finish(() => reject(imageInvalid(`Image could not be decoded: ${err.message}`))));
    worker.once('exit', (code) => finish(() => reject(imageInvalid(`Image decoder stopped (exit code ${code})`))));
  });
}
