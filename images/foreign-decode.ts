import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { AppError, imageInvalid, imageTooLarge } from '../core/errors.ts';
import { Limiter } from '../core/limiter.ts';
import { tookTooLong, unavailable, type DecoderOutcome } from './decoder-outcome.ts';
import { decodeHeifNative, heicDecoder, type HeifWant } from './heic-native.ts';

/**
 * Decodes the two formats the prebuilt sharp cannot: HEVC-coded HEIF (iPhone HEIC; libvips is built
 * without an HEVC decoder) and BMP (bmp-ts). Only images/open.ts calls this; everything else gets a
 * sharp pipeline from there.
 *
 * A HEIC goes to the system's libheif in a child forked for it by a heif-decode server
 * (images/heic-native.ts) when this machine has that decoder, and otherwise, like a BMP, to a worker
 * thread started for it and ended after, running libheif's WASM build (libheif-js: libheif + libde265). Either way the decode is off
 * the event loop (an 8.5 MP HEIC takes 0.27 s of CPU natively, 0.7 s in WASM, more wall time on
 * a busy core: bench/heic-decode.ts), whatever the decoder allocates goes when it ends, and a
 * decode that runs away is ended by the timeout instead of holding a core. Both kinds share one
 * queue, with the same limits.
 */

export type ForeignKind = 'heif' | 'bmp';

/**
 * What the pixels are for: `primary`, the picture itself (probe's check, the vendor's work copy);
 * `fingerprint`, only the small fingerprint intermediate (images/decode.ts), so a HEIC is decoded
 * from its embedded thumbnail when it carries one fit for it (docs/decisions.md, "The fingerprint
 * of a HEIC"), and otherwise from the image itself, in the decode a concurrent `primary` decode of
 * the same bytes shares (the worker's work copy): one full decode per analysis either way.
 */
export type DecodePurpose = 'primary' | 'fingerprint';

export interface DecodedRgb {
  /** Interleaved 8-bit RGB, width × height × 3 bytes, upright (libheif applies irot/imir/clap). */
  pixels: Buffer;
  width: number;
  height: number;
}

/** Decodes at once per process: each holds a core and up to width × height × 7 bytes (16 in a native child at most). */
const MAX_CONCURRENT = 2;
/**
 * Decodes that may wait for a slot (each waiter holds its request's image): beyond them, 503 with
 * Retry-After, as for enrichments (enrich/service.ts). Four per slot is about 10 s of waiting for
 * 8.5 MP HEICs on a busy core.
 */
const MAX_WAITING = 4 * MAX_CONCURRENT;
/** Longest a decode waits for a slot; then 503 with Retry-After rather than an answer minutes late. */
const MAX_QUEUE_WAIT_MS = 30_000;
/** Far above the largest accepted image's decode time; a decode still running is ended. */
const DECODE_TIMEOUT_MS = 120_000;
/**
 * The decode worker's JS heap. Pixels live outside it (Buffers, the WASM memory), so no image
 * within the pixel limit needs more than a few MB of it; the limit ends a decoder that runs away
 * (bmp-ts building millions of palette objects) in its worker, instead of growing the process.
 */
export const WORKER_LIMITS = { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 } as const;

const WORKER_URL = new URL('./foreign-decode.worker.mjs', import.meta.url);

const busy = (message: string, retryAfterS: number) => new AppError('SERVICE_UNAVAILABLE', message, { headers: { 'retry-after': String(retryAfterS) } });

const slots = new Limiter(MAX_CONCURRENT, {
  maxWaiting: MAX_WAITING,
  full: () => busy('Too many images are waiting to be decoded on this server; send the request again in a moment', 2),
});

let decodersStarted = 0;
/**
 * The process's decode queue as it stands: decodes running and waiting for a slot, decoders
 * (worker threads or heif-decode processes) started since the process began, and the queue
 * itself (tests hold its slots to fill it).
 */
export const decodeQueue = {
  get active(): number {
    return slots.active;
  },
  get waiting(): number {
    return slots.waiting;
  },
  get started(): number {
    return decodersStarted;
  },
  slots,
};

/**
 * Test overrides of the waits, and a caller's signal (its client's connection): the caller stops
 * waiting when it aborts, and the decode leaves the queue (or its worker ends) once no caller waits.
 */
export interface DecodeOptions {
  signal?: AbortSignal;
  /**
   * What the pixels are for (DecodePurpose). Only the native HEIC decoder reads thumbnails; with
   * the WASM fallback, and for a BMP, a fingerprint's decode is the image's own.
   */
  purpose?: DecodePurpose;
  queueWaitMs?: number;
  timeoutMs?: number;
}

/** What foreign-decode.worker.mjs posts back. */
type WorkerAnswer =
  | { ok: true; width: number; height: number; pixels: ArrayBuffer }
  | { ok: false; reason: 'too-large' | 'invalid' | 'failed'; message: string };

/** Refusals this decoder worded itself: final, nothing to learn from decoding again. */
const refusals = new WeakSet<AppError>();
export const isDecoderRefusal = (err: unknown): boolean => err instanceof AppError && refusals.has(err);

function mark(err: AppError): AppError {
  refusals.add(err);
  return err;
}

function refuse(err: AppError): never {
  throw mark(err);
}

/**
 * Identical bytes decoding at the same time share one decode (a client retrying an upload, the
 * same photo twice in a request, or analyze and lookup of one photo at once): each costs seconds.
 * A caller whose signal aborts (its client disconnected) stops waiting at once; the shared decode
 * leaves the queue, or its worker is ended, only when no caller is left waiting for it.
 */
interface Shared {
  /** null: a thumbnail was asked for and the image has none that fits. */
  decode: Promise<DecodedRgb | null>;
  /** Callers still waiting that may abort. */
  waiting: number;
  /** A caller without a signal joined: the decode runs whatever the others do. */
  pinned: boolean;
  /** Aborted when the last caller that may abort left, and no pinned one joined. */
  nobodyWaits: AbortController;
}
const inFlight = new Map<string, Shared>();

/**
 * A HEIC's fingerprint decodes under way, by the key of the image's own decode: one of those that
 * ends meanwhile leaves its pixels here, so that a fingerprint that finds no thumbnail takes them
 * instead of decoding the image again (the worker's work copy and hashes start together:
 * vendors/work-copies.ts).
 */
const awaitingImage = new Map<string, { count: number; image?: DecodedRgb }>();

export async function decodeForeign(kind: ForeignKind, bytes: Buffer, maxPixels: number, opts: DecodeOptions = {}): Promise<DecodedRgb> {
  if (opts.signal?.aborted) throw opts.signal.reason;
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const imageKey = `${kind}:primary:${maxPixels}:${sha256}`;
  const image = async () => (await share(imageKey, kind, bytes, maxPixels, opts, 'primary')) ?? noPicture();
  if (kind !== 'heif' || opts.purpose !== 'fingerprint') return image();
  const waiter = awaitingImage.get(imageKey) ?? { count: 0 };
  waiter.count += 1;
  awaitingImage.set(imageKey, waiter);
  try {
    // Only the native decoder is asked for thumbnails (DecodeOptions.purpose).
    if ((await heicDecoder()).backend === 'native') {
      const thumbnail = await share(`heif:thumbnail:${maxPixels}:${sha256}`, kind, bytes, maxPixels, opts, 'thumbnail');
      if (thumbnail) return thumbnail;
    }
    return waiter.image ?? (await image());
  } finally {
    waiter.count -= 1;
    if (waiter.count === 0 && awaitingImage.get(imageKey) === waiter) awaitingImage.delete(imageKey);
  }
}

const noPicture = (): never => {
  throw new AppError('INTERNAL_ERROR', 'Image decoder answered no picture');
};

/** One decode of `want` for every concurrent caller with the same key (Shared). */
function share(key: string, kind: ForeignKind, bytes: Buffer, maxPixels: number, opts: DecodeOptions, want: HeifWant): Promise<DecodedRgb | null> {
  if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);
  let shared = inFlight.get(key);
  if (!shared) {
    const nobodyWaits = new AbortController();
    const decode = decodeOnce(kind, bytes, maxPixels, { ...opts, signal: nobodyWaits.signal }, want)
      .then((image) => {
        const waiter = awaitingImage.get(key);
        if (waiter && image) waiter.image = image;
        return image;
      })
      .finally(() => {
        if (inFlight.get(key) === shared) inFlight.delete(key);
      });
    decode.catch(() => undefined); // each caller handles the outcome; nobody may be left to
    shared = { decode, waiting: 0, pinned: false, nobodyWaits };
    inFlight.set(key, shared);
  }
  return join(shared, key, opts.signal);
}

function join(shared: Shared, key: string, signal: AbortSignal | undefined): Promise<DecodedRgb | null> {
  if (!signal) {
    shared.pinned = true;
    return shared.decode;
  }
  shared.waiting += 1;
  return new Promise<DecodedRgb | null>((resolve, reject) => {
    const leave = () => {
      shared.waiting -= 1;
      if (shared.waiting === 0 && !shared.pinned) {
        // Nobody wants these pixels: the next caller of the same bytes starts afresh.
        if (inFlight.get(key) === shared) inFlight.delete(key);
        shared.nobodyWaits.abort(signal.reason);
      }
      reject(signal.reason);
    };
    signal.addEventListener('abort', leave, { once: true });
    shared.decode.then(
      (value) => {
        signal.removeEventListener('abort', leave);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', leave);
        reject(err);
      },
    );
  });
}

/** null: `thumbnail` was asked for and the image has none that fits (nothing was decoded). */
async function decodeOnce(kind: ForeignKind, bytes: Buffer, maxPixels: number, opts: DecodeOptions, want: HeifWant): Promise<DecodedRgb | null> {
  const queueWaitMs = opts.queueWaitMs ?? MAX_QUEUE_WAIT_MS;
  const deadline = AbortSignal.timeout(queueWaitMs);
  const leave = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  let started = false;
  return slots
    .run(async () => {
      started = true;
      const outcome = await runDecoder(kind, bytes, maxPixels, opts.timeoutMs ?? DECODE_TIMEOUT_MS, opts.signal, want);
      if (!outcome.ok) {
        if (outcome.reason === 'no-thumbnail') return null;
        // Only what the decoder found wrong with the image is the image's fault, and final.
        if (outcome.reason === 'failed') throw new AppError('INTERNAL_ERROR', `Image decoder failed: ${outcome.message}`);
        // Server-side failures are not the image's fault: 503, retryable (workflows/steps.ts retries it), never IMAGE_INVALID.
        if (outcome.reason === 'unavailable') throw busy(outcome.message, outcome.retryAfterS);
        refuse(outcome.reason === 'too-large' ? imageTooLarge(outcome.message) : imageInvalid(outcome.message));
      }
      const { pixels, width, height } = outcome;
      if (pixels.length !== width * height * 3 || width * height > maxPixels) throw new AppError('INTERNAL_ERROR', 'Image decoder returned an unexpected pixel count');
      return { pixels, width, height };
    }, leave)
    .catch((err: unknown) => {
      if (err instanceof AppError) throw err;
      if (!started && leave.aborted && !opts.signal?.aborted) throw busy(`No image decoder was free within ${queueWaitMs / 1000} s; send the request again in a moment`, 5);
      throw err;
    });
}

/** A HEIC to the native decoder when this process has one, anything else to a WASM/JS worker. */
async function runDecoder(kind: ForeignKind, bytes: Buffer, maxPixels: number, timeoutMs: number, signal: AbortSignal | undefined, want: HeifWant): Promise<DecoderOutcome> {
  const decoder = kind === 'heif' ? await heicDecoder() : null;
  if (signal?.aborted) throw signal.reason;
  if (want === 'thumbnail' && decoder?.backend !== 'native') return { ok: false, reason: 'no-thumbnail', message: 'only the native HEIC decoder reads thumbnails' };
  decodersStarted += 1;
  return decoder?.backend === 'native'
    ? decodeHeifNative(decoder.path, bytes, maxPixels, { timeoutMs, want, ...(signal ? { signal } : {}) })
    : runWorker(kind, bytes, maxPixels, timeoutMs, signal);
}

function runWorker(kind: ForeignKind, bytes: Buffer, maxPixels: number, timeoutMs: number, signal?: AbortSignal): Promise<DecoderOutcome> {
  return new Promise((resolve, reject) => {
    let worker: Worker;
    try {
      worker = new Worker(WORKER_URL, { workerData: { kind, bytes: new Uint8Array(bytes), maxPixels }, resourceLimits: WORKER_LIMITS });
    } catch (err) {
      resolve(unavailable(`Image decoder could not start: ${err instanceof Error ? err.message : String(err)}`, 2));
      return;
    }
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', gone);
      void worker.terminate();
      fn();
    };
    const answer = (outcome: DecoderOutcome) => finish(() => resolve(outcome));
    // Every caller of this decode went away: its core goes back to the others.
    const gone = () => finish(() => reject(signal!.reason));
    signal?.addEventListener('abort', gone, { once: true });
    const timer = setTimeout(() => answer(tookTooLong(timeoutMs)), timeoutMs);
    worker.once('message', (a: WorkerAnswer) => answer(a.ok ? { ...a, pixels: Buffer.from(a.pixels) } : a));
    worker.once('error', (err: Error & { code?: string }) => {
      // The heap limit is far above what any image within the pixel limit needs (WORKER_LIMITS):
      // a file that exhausts it makes the decoder run away, and would do so again. Final.
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') {
        answer({ ok: false, reason: 'invalid', message: `Image needs more memory than its declared size allows to decode (decoder heap over ${WORKER_LIMITS.maxOldGenerationSizeMb} MB); refused as malformed` });
      } else answer(unavailable(`Image decoder failed: ${err.message}`, 2));
    });
    worker.once('exit', (code) => answer(unavailable(`Image decoder stopped (exit code ${code})`, 2)));
  });
}
