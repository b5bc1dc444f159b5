import type { VendorName } from '../core/config.ts';
import type { VendorUsage } from './types.ts';

/**
 * How a vendor call failed, from the workflow's point of view:
 * - `unavailable`: the vendor could not answer now (network, timeout, 408/409/429/5xx). Retry it.
 * - `rejected`: the vendor refused this request (auth, bad request, content policy). Retrying the
 *   same request on the same vendor cannot help.
 * - `invalid_output`: the vendor answered, but not with JSON that satisfies the schema (unparseable,
 *   no tool call, empty, truncated, schema violation). Not retried on the same vendor; the workflow
 *   falls back to the next one.
 */
export type VendorErrorKind = 'unavailable' | 'rejected' | 'invalid_output';

export class VendorError extends Error {
  override name = 'VendorError';
  readonly vendor: VendorName;
  readonly kind: VendorErrorKind;
  readonly retryable: boolean;
  /** HTTP status of the vendor response, when there was one. */
  readonly status: number | undefined;
  /** True when the caller's AbortSignal ended the call (activity cancelled or timed out). */
  readonly aborted: boolean;
  /** The vendor's Retry-After on a 429 or 503, in ms, when it sent one. */
  readonly retryAfterMs: number | undefined;
  /**
   * What the vendor billed for an answer it gave that we refuse (not JSON, truncated, refused,
   * no tool call): the tokens are spent all the same (vendors/answer.ts `billedAnswer`).
   */
  usage: VendorUsage | undefined;

  constructor(
    vendor: VendorName,
    kind: VendorErrorKind,
    message: string,
    opts: { status?: number | undefined; aborted?: boolean; cause?: unknown; retryAfterMs?: number | undefined } = {},
  ) {
    super(`${vendor}: ${message}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.vendor = vendor;
    this.kind = kind;
    this.retryable = kind === 'unavailable';
    this.status = opts.status;
    this.aborted = opts.aborted ?? false;
    this.retryAfterMs = opts.retryAfterMs;
  }

  /** The error code the API renders when this is the last vendor failure (core/errors.ts). */
  get appCode(): 'PROVIDER_UNAVAILABLE' | 'PROVIDER_ERROR' {
    return this.kind === 'unavailable' ? 'PROVIDER_UNAVAILABLE' : 'PROVIDER_ERROR';
  }
}

/** 408, 409, 429 and every 5xx are transient; every other 4xx is the vendor refusing the request. */
export function kindForStatus(status: number): Exclude<VendorErrorKind, 'invalid_output'> {
  if (status === 408 || status === 409 || status === 429 || status >= 500) return 'unavailable';
  return 'rejected';
}

export function httpError(vendor: VendorName, status: number, message: string, cause: unknown, headers?: { get(name: string): string | null } | undefined): VendorError {
  return new VendorError(vendor, kindForStatus(status), `HTTP ${status}: ${message}`, { status, cause, retryAfterMs: retryAfterMs(headers, message) });
}

/**
 * How long the vendor asked us to wait: `retry-after-ms` (OpenAI), else `Retry-After` in seconds
 * or as an HTTP date; Gemini's SDK keeps no headers, so its RetryInfo `retryDelay` ("12s") is read
 * from the error body the message carries.
 */
export function retryAfterMs(headers: { get(name: string): string | null } | undefined, message = ''): number | undefined {
  const ms = Number(headers?.get('retry-after-ms') ?? NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers?.get('retry-after');
  if (raw) {
    const seconds = Number(raw);
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    const date = Date.parse(raw);
    if (Number.isFinite(date)) return Math.max(0, date - Date.now());
  }
  const delay = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(message);
  return delay ? Number(delay[1]) * 1000 : undefined;
}

export function abortedError(vendor: VendorName, cause: unknown): VendorError {
  return new VendorError(vendor, 'unavailable', 'call aborted by the caller', { aborted: true, cause });
}

export function networkError(vendor: VendorName, message: string, cause: unknown): VendorError {
  return new VendorError(vendor, 'unavailable', message, { cause });
}

export function invalidOutput(vendor: VendorName, message: string, cause?: unknown): VendorError {
  return new VendorError(vendor, 'invalid_output', message, { cause });
}

export function refused(vendor: VendorName, message: string): VendorError {
  return new VendorError(vendor, 'rejected', message);
}

export function isVendorError(e: unknown): e is VendorError {
  return e instanceof VendorError;
}

/** Message of an unknown thrown value, for wrapping. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
