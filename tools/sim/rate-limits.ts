import { z } from 'zod';

/**
 * A simulated vendor's rate limits: requests and tokens per minute, counted over a sliding
 * 60-second window of the calls it admitted (the strictest common reading: no 60-second span ever
 * holds more than the limit, however the calls were spread). A call beyond either limit is
 * answered 429 with `Retry-After` (whole seconds, rounded up) and `retry-after-ms` (OpenAI's
 * precise form): the time until the window has room again. A refused call is not counted.
 *
 * Tokens are what the call billed (input + output); the sim knows them only once it answered, so
 * a call is admitted while the window's tokens are below the limit and its tokens are added when
 * it is answered (OpenAI and Anthropic likewise refuse once the minute's tokens are spent).
 */
export const limitsSchema = z.strictObject({
  /** Requests per minute; 0 = unlimited. */
  rpm: z.number().int().min(0),
  /** Tokens (input + output) per minute; 0 = unlimited. */
  tpm: z.number().int().min(0),
});
export type Limits = z.infer<typeof limitsSchema>;
export const limitsPatchSchema = limitsSchema.partial();
export type LimitsPatch = z.infer<typeof limitsPatchSchema>;
export const NO_LIMITS: Limits = { rpm: 0, tpm: 0 };

const WINDOW_MS = 60_000;

export type Admission = { ok: true; addTokens(n: number): void } | { ok: false; retryAfterMs: number };

export interface VendorRateLimit {
  limits(): Limits;
  set(patch: LimitsPatch): void;
  /** Admit a call arriving at `now` (ms), or say how long until one would be admitted. */
  admit(now: number): Admission;
  reset(limits: Limits): void;
}

export function createVendorRateLimit(initial: Limits): VendorRateLimit {
  let limits = { ...initial };
  // Admitted calls in arrival order: [time, tokens]. Pruned as the window moves on.
  let calls: Array<{ at: number; tokens: number }> = [];
  const prune = (now: number) => {
    let i = 0;
    while (i < calls.length && calls[i]!.at <= now - WINDOW_MS) i++;
    if (i) calls = calls.slice(i);
  };
  return {
    limits: () => ({ ...limits }),
    set(patch) {
      limits = { ...limits, ...limitsPatchSchema.parse(patch) };
    },
    reset(next) {
      limits = { ...next };
      calls = [];
    },
    admit(now) {
      prune(now);
      let wait = 0;
      if (limits.rpm > 0 && calls.length >= limits.rpm) {
        // Room again once all but rpm-1 of the counted calls have left the window.
        wait = Math.max(wait, calls[calls.length - limits.rpm]!.at + WINDOW_MS - now);
      }
      if (limits.tpm > 0) {
        let used = calls.reduce((n, c) => n + c.tokens, 0);
        if (used >= limits.tpm) {
          let i = 0;
          while (used >= limits.tpm && i < calls.length) used -= calls[i++]!.tokens;
          wait = Math.max(wait, calls[i - 1]!.at + WINDOW_MS - now);
        }
      }
      if (wait > 0) return { ok: false, retryAfterMs: Math.max(1, Math.ceil(wait)) };
      const entry = { at: now, tokens: 0 };
      calls.push(entry);
      return {
        ok: true,
        addTokens(n) {
          entry.tokens += n;
        },
      };
    },
  };
}

/** The headers of a 429 beyond a limit. */
export function retryAfterHeaders(retryAfterMs: number): Record<string, string> {
  return { 'retry-after': String(Math.ceil(retryAfterMs / 1000)), 'retry-after-ms': String(retryAfterMs) };
}
