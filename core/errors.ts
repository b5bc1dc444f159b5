/**
 * One enum of error codes, one error class, one envelope (docs/contract.md "Errors").
 * Everything the service can fail with is an AppError; the API's error handler renders it.
 */
export const ERROR_STATUS = {
  VALIDATION_FAILED: 400,
  AUTH_FAILED: 401,
  PLAN_LIMIT_EXCEEDED: 402,
  SCHEMA_NOT_FOUND: 404,
  PHOTO_NOT_IN_REGISTRY: 404,
  NOT_FOUND: 404,
  /** Console: a member whose role does not allow the action. */
  FORBIDDEN: 403,
  /** An x-request-id sent again with a different request, or whose finished run can no longer answer. */
  REQUEST_ID_CONFLICT: 409,
  /** Pause, resume or cancel of a batch that has completed or been cancelled. */
  BATCH_FINISHED: 409,
  /** Retry of a batch photo that did not fail, or whose bytes were never (or are no longer) kept. */
  ITEM_NOT_RETRYABLE: 409,
  /** The request did not arrive in full within the server's request timeout. */
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  IMAGE_INVALID: 422,
  IMAGE_TOO_LARGE: 422,
  RATE_LIMITED: 429,
  /** Request line and headers over Node's 16 KB limit. */
  HEADERS_TOO_LARGE: 431,
  INTERNAL_ERROR: 500,
  PROVIDER_UNAVAILABLE: 502,
  PROVIDER_ERROR: 502,
  /** The process is shutting down (graceful drain); another instance or a retry will answer. */
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'REQUEST_TIMEOUT',
  'RATE_LIMITED',
  'INTERNAL_ERROR',
  'PROVIDER_UNAVAILABLE',
  'PROVIDER_ERROR',
  'SERVICE_UNAVAILABLE',
]);

export interface CreditShortfall {
  needed: number;
  community: number;
  purchased: number;
  total: number;
  resetsInDays: number;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  /** Extra fields merged into `error` (e.g. `credits` on 402). */
  readonly details: Record<string, unknown> | undefined;
  /** Extra response headers (e.g. Retry-After on 429). */
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.retryable = RETRYABLE.has(code);
    this.details = opts.details;
    this.headers = opts.headers;
  }
}

export const validationFailed = (message: string) => new AppError('VALIDATION_FAILED', message);
export const imageInvalid = (message: string) => new AppError('IMAGE_INVALID', message);
/**
 * A photo that cannot be read or decoded, in Lenstack's words, the same every time: the decoder's
 * own (libvips words one file differently from run to run) stay with the cause, which the logs keep.
 */
export const CORRUPT_IMAGE = 'Image is corrupt or truncated: its pixels could not be decoded';
export const UNREADABLE_IMAGE = 'Image could not be read: its header is damaged, or it is not one of the formats accepted';
export const corruptImage = (cause: unknown, message = CORRUPT_IMAGE) => (cause instanceof AppError ? cause : new AppError('IMAGE_INVALID', message, { cause }));
export const imageTooLarge = (message: string) => new AppError('IMAGE_TOO_LARGE', message);
export const authFailed = (message = 'Missing or invalid API key') => new AppError('AUTH_FAILED', message);

export function planLimitExceeded(credits: CreditShortfall): AppError {
  return new AppError(
    'PLAN_LIMIT_EXCEEDED',
    `Insufficient credits: this call needs ${credits.needed}, ${credits.total} available`,
    { details: { credits }, headers: { 'cache-control': 'no-store, private' } },
  );
}

export interface ErrorEnvelope {
  error: { code: string; message: string; retryable: boolean; requestId: string } & Record<string, unknown>;
}

export function envelope(err: AppError, requestId: string): ErrorEnvelope {
  return { error: { code: err.code, message: err.message, retryable: err.retryable, requestId, ...(err.details ?? {}) } };
}

/**
 * Errors crossing the Temporal boundary lose their class; they travel as ApplicationFailure with
 * `type` = our code and `details[0]` = our details. These helpers keep that mapping in one place.
 */
export function isErrorCode(s: unknown): s is ErrorCode {
  return typeof s === 'string' && Object.prototype.hasOwnProperty.call(ERROR_STATUS, s);
}
