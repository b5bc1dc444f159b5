import type { VendorName } from '../core/config.ts';

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

  constructor(
    vendor: VendorName,
    kind: VendorErrorKind,
    message: string,
    opts: { status?: number | undefined; aborted?: boolean; cause?: unknown } = {},
  ) {
    super(`${vendor}: ${message}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.vendor = vendor;
    this.kind = kind;
    this.retryable = kind === 'unavailable';
    this.status = opts.status;
    this.aborted = opts.aborted ?? false;
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

export function httpError(vendor: VendorName, status: number, message: string, cause: unknown): VendorError {
  return new VendorError(vendor, kindForStatus(status), `HTTP ${status}: ${message}`, { status, cause });
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
