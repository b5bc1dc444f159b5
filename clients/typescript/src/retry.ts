/**
 * The fetch the client hands openapi-fetch: one x-request-id per logical request, reused on every
 * attempt (the API treats a repeated id as the same request: an analysis runs and bills once),
 * and bounded retries with jittered exponential backoff that honour Retry-After.
 */

export interface RetryOptions {
  /** Attempts in all, the first included (default 3; 1 = no retries). */
  maxAttempts?: number;
  /** First backoff step in ms (default 500); step n is base × 2^(n-1), capped, fully jittered. */
  baseDelayMs?: number;
  /** Cap of one backoff step in ms (default 8000). */
  maxDelayMs?: number;
  /**
   * A Retry-After longer than this (ms, default 60000) is not waited for: the error is returned
   * with `retryAfterSeconds` so the caller decides (the daily free-vendor-call cap answers 429
   * with a wait until midnight UTC).
   */
  maxRetryAfterMs?: number;
}

export interface RetryEvent {
  /** The attempt that failed (1-based). */
  attempt: number;
  /** Why: the HTTP status (429, 503), or `network`. */
  reason: number | 'network';
  /** How long the client waits before the next attempt. */
  delayMs: number;
  requestId: string;
}

export interface FetchPolicy {
  /** Whether a request whose answer never arrived may be sent again (true only where the API is idempotent). */
  retryNetworkErrors: boolean;
}

/** What the retry loop tells the error mapping: the id it sent and how many attempts it made. */
export interface AttemptInfo {
  attempts: number;
  requestId: string;
}

export class NetworkFailure extends Error {
  constructor(
    readonly requestId: string,
    readonly attempts: number,
    cause: unknown,
  ) {
    super(`No answer from the API after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${describe(cause)}`, { cause });
  }
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = (cause as Error & { cause?: unknown }).cause;
    return inner instanceof Error ? `${cause.message} (${inner.message})` : cause.message;
  }
  return String(cause);
}

const RETRY_STATUSES = new Set([429, 503]);
export const REQUEST_ID_HEADER = 'x-request-id';

/** Seconds from a Retry-After header (delta-seconds or an HTTP-date); undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** A request id the API honours (`^[A-Za-z0-9._:-]{1,128}$`). */
export function newRequestId(): string {
  return `req_${crypto.randomUUID().replace(/-/g, '')}`;
}

export function retryingFetch(
  base: (req: Request) => Promise<Response>,
  options: Required<RetryOptions>,
  policy: FetchPolicy,
  onRetry: ((e: RetryEvent) => void) | undefined,
  sleep: (ms: number, signal: AbortSignal) => Promise<void>,
  info: AttemptInfo,
): (req: Request) => Promise<Response> {
  return async (request) => {
    let requestId = request.headers.get(REQUEST_ID_HEADER);
    if (!requestId) {
      requestId = newRequestId();
      request.headers.set(REQUEST_ID_HEADER, requestId);
    }
    info.requestId = requestId;
    for (let attempt = 1; ; attempt++) {
      info.attempts = attempt;
      const last = attempt >= options.maxAttempts;
      // A Request's body can be read once: every attempt but the last sends a copy.
      const sent = last ? request : request.clone();
      let response: Response;
      try {
        response = await base(sent);
      } catch (err) {
        if (request.signal.aborted) throw err;
        if (last || !policy.retryNetworkErrors) throw new NetworkFailure(requestId, attempt, err);
        const delayMs = backoff(attempt, options);
        onRetry?.({ attempt, reason: 'network', delayMs, requestId });
        await sleep(delayMs, request.signal);
        continue;
      }
      if (!RETRY_STATUSES.has(response.status) || last) return response;
      const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
      if (retryAfter !== undefined && retryAfter * 1000 > options.maxRetryAfterMs) return response;
      // Honour the server's wait; a little jitter on top so many clients do not return at once.
      const delayMs = retryAfter !== undefined ? retryAfter * 1000 + Math.floor(Math.random() * 250) : backoff(attempt, options);
      await response.body?.cancel().catch(() => {});
      onRetry?.({ attempt, reason: response.status, delayMs, requestId });
      await sleep(delayMs, request.signal);
    }
  };
}

/** Full jitter (AWS architecture blog): uniform in [0, min(cap, base × 2^(attempt-1))]. */
function backoff(attempt: number, o: Required<RetryOptions>): number {
  return Math.floor(Math.random() * Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** (attempt - 1)));
}

export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
