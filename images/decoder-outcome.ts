/**
 * What one decode by a decoder outside this thread (the WASM worker, the native heif-decode
 * process) came to; images/foreign-decode.ts turns it into pixels or the error the caller sees.
 */
export type DecoderOutcome =
  /** Interleaved 8-bit RGB, width × height × 3 bytes. */
  | { ok: true; width: number; height: number; pixels: Buffer }
  /** What the decoder found wrong with the image: final, a 422. */
  | { ok: false; reason: 'too-large' | 'invalid'; message: string }
  /** Asked for a HEIC's thumbnail (images/heic-native.ts, HeifWant), it has none that fits: nothing decoded. */
  | { ok: false; reason: 'no-thumbnail'; message: string }
  /** The decoder's own failure, not the image's. */
  | { ok: false; reason: 'failed'; message: string }
  /** The server could not decode now (timeout on a busy machine, no decoder could start): 503, retryable. */
  | { ok: false; reason: 'unavailable'; message: string; retryAfterS: number };

export const unavailable = (message: string, retryAfterS: number): DecoderOutcome => ({ ok: false, reason: 'unavailable', message, retryAfterS });

/** A decode still running at its deadline: most often a starved CPU, the server's fault, not the image's. */
export const tookTooLong = (timeoutMs: number): DecoderOutcome => unavailable(`Image took over ${timeoutMs / 1000} s to decode on a busy server`, 5);
