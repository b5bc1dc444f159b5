import { isErrorEnvelope } from './errors.ts';

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
  /**
   * Whether the request may be sent again after any answer it lost or any 429/503 (true only where
   * the API is idempotent). When false, only a 429/503 carrying the API's error envelope is resent:
   * the API refused before doing anything; a gateway's bare 503 promises nothing of the kind.
   */
  idempotent: boolean;
}

/** Sleeps `ms` (rejecting when `signal` aborts); the client's option `sleep` replaces it in tests. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

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

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = MONTHS.join('|');
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
/** The three HTTP-date forms of RFC 9110 §5.6.7, each captured as day, month, year, h, m, s. */
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) (${MONTH}) (\\d{4}) ${TIME} GMT$`);
const RFC_850 = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-(${MONTH})-(\\d{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (${MONTH}) ([ \\d]\\d) ${TIME} (\\d{4})$`);

/** An HTTP-date as ms since the epoch; undefined for anything else (Date.parse reads "1.5" or "-1" as dates). */
export function parseHttpDate(value: string, now = Date.now()): number | undefined {
  let parts: [day: string, month: string, year: number, h: string, m: string, s: string] | undefined;
  let m: RegExpExecArray | null;
  if ((m = IMF_FIXDATE.exec(value))) parts = [m[1]!, m[2]!, Number(m[3]), m[4]!, m[5]!, m[6]!];
  else if ((m = RFC_850.exec(value))) {
    // A two-digit year more than 50 years ahead is in the past century (RFC 9110 §5.6.7).
    const thisYear = new Date(now).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(m[3]);
    if (year > thisYear + 50) year -= 100;
    parts = [m[1]!, m[2]!, year, m[4]!, m[5]!, m[6]!];
  } else if ((m = ASCTIME.exec(value))) parts = [m[2]!.trim(), m[1]!, Number(m[6]), m[3]!, m[4]!, m[5]!];
  if (!parts) return undefined;
  const [day, month, year, h, min, sec] = parts;
  const at = Date.UTC(year, MONTHS.indexOf(month), Number(day), Number(h), Number(min), Number(sec));
  const d = new Date(at);
  // Date.UTC rolls 32 Nov over into December; a real date survives the round trip.
  if (d.getUTCDate() !== Number(day) || d.getUTCHours() !== Number(h) || d.getUTCMinutes() !== Number(min) || d.getUTCSeconds() !== Number(sec)) return undefined;
  return at;
}

/**
 * Seconds from a Retry-After header: delta-seconds (a non-negative integer) or an HTTP-date;
 * undefined when absent or anything else, so the caller falls back to its own backoff.
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  const at = parseHttpDate(v, now);
  return at === undefined ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** What the API accepts as x-request-id; it replaces anything else with an id of its own. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** Throws a TypeError for a request id the API would not keep (a retry would then be a new request). */
export function checkRequestId(requestId: string | undefined): void {
  if (requestId !== undefined && !REQUEST_ID_PATTERN.test(requestId)) {
    throw new TypeError(`requestId must match ${REQUEST_ID_PATTERN.source} (the API replaces any other id, so a retry would run and bill again): ${JSON.stringify(requestId.slice(0, 140))}`);
  }
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
  sleep: Sleep,
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
        if (last || !policy.idempotent) throw new NetworkFailure(requestId, attempt, err);
        const delayMs = backoff(attempt, options);
        onRetry?.({ attempt, reason: 'network', delayMs, requestId });
        await sleep(delayMs, request.signal);
        continue;
      }
      if (!RETRY_STATUSES.has(response.status) || last) return response;
      if (!policy.idempotent && !(await carriesEnvelope(response))) return response;
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

/** Whether an answer's body is the API's error envelope (read from a copy: the caller still gets the body). */
async function carriesEnvelope(response: Response): Promise<boolean> {
  try {
    return isErrorEnvelope(await response.clone().json());
  } catch {
    return false;
  }
}

/** Full jitter (AWS architecture blog): uniform in [0, min(cap, base × 2^(attempt-1))]. */
export function backoff(attempt: number, o: Required<RetryOptions>): number {
  return Math.floor(Math.random() * Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** (attempt - 1)));
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
