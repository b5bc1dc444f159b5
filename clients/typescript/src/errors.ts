import type { components } from './generated/lenstack.ts';

type Envelope = components['schemas']['ErrorEnvelope']['error'];

/** A code from the API's error envelope, or one the client sets when no envelope arrived. */
export type LenstackErrorCode =
  | Envelope['code']
  /** The request never got an HTTP answer (DNS, refused or reset connection, TLS) after every attempt. */
  | 'NETWORK_ERROR'
  /** An HTTP answer that is not the API's error envelope (a proxy's HTML page, a truncated body). */
  | 'UNEXPECTED_RESPONSE';

export type CreditShortfall = NonNullable<Envelope['credits']>;

/**
 * Every failure the client reports: an error answer of the API (its envelope's code, message and
 * retryable flag, the HTTP status and request id), or a request that got no usable answer.
 * Thrown, not returned: callers who only handle the happy path still see failures.
 */
export class LenstackError extends Error {
  override readonly name = 'LenstackError';
  readonly code: LenstackErrorCode;
  /** HTTP status; null when no answer arrived (`NETWORK_ERROR`). */
  readonly status: number | null;
  /** The x-request-id the request was sent with (the same on every attempt). */
  readonly requestId: string;
  readonly retryable: boolean;
  /** On 402 `PLAN_LIMIT_EXCEEDED`: what was needed and what the account has. */
  readonly credits: CreditShortfall | undefined;
  /** On 429/503: the server's Retry-After, in seconds, when it sent one. */
  readonly retryAfterSeconds: number | undefined;
  /** How many attempts were made before giving up. */
  readonly attempts: number;

  constructor(init: {
    code: LenstackErrorCode;
    message: string;
    status: number | null;
    requestId: string;
    retryable: boolean;
    credits?: CreditShortfall | undefined;
    retryAfterSeconds?: number | undefined;
    attempts: number;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.retryable = init.retryable;
    this.credits = init.credits;
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.attempts = init.attempts;
  }
}

export function isErrorEnvelope(body: unknown): body is { error: Envelope } {
  const e = (body as { error?: Record<string, unknown> } | null)?.error;
  return typeof e === 'object' && e !== null && typeof e.code === 'string' && typeof e.message === 'string';
}
