import { ERROR_STATUS, isErrorCode } from '../../core/errors.ts';
import type { PlannedCall } from './plan.ts';

/**
 * One chaos client call: POST the planned request to an API process, retry what a well-behaved
 * client retries (connection failures, 500, 503, 429) with the same x-request-id, on the other API
 * process, and record every attempt. A 429 or 503 is resent after its Retry-After, for as long as
 * `retryForMs` from the first attempt (longer than the run's Temporal outage: a real client told to
 * come back does, however long the outage), so every call ends in a 200 or a definitive answer. A
 * client-side timeout is never retried: it is a hang.
 */

export interface Attempt {
  api: number;
  /** Wall-clock start and end (Date.now()), to place the attempt against the fault windows. */
  from: number;
  to: number;
  ms: number;
  /** The Retry-After header of a 429 or 503, as sent. */
  retryAfter?: string | null;
  status?: number;
  code?: string;
  /** Connection-level failure (refused, reset, closed mid-answer). */
  network?: string;
}

export type Final =
  | { kind: 'answer'; status: 200; creditsCharged: number; cacheHit: boolean }
  | { kind: 'answer'; status: number; code: string; retryable: boolean }
  /** Not a 200 body and not the error envelope of docs/contract.md (or its code/status/requestId disagree). */
  | { kind: 'malformed'; status: number; detail: string }
  /** No answer within the client timeout. */
  | { kind: 'timeout' }
  /** Every attempt failed at the connection level. */
  | { kind: 'unanswered'; detail: string };

export interface CallResult {
  call: PlannedCall;
  attempts: Attempt[];
  final: Final;
}

export interface ClientOptions {
  /** Base URLs of the API processes. */
  apis: () => string[];
  keyOf: (user: number) => string;
  timeoutMs: number;
  /** Attempts at most (a bound on the loop; `retryForMs` is what ends it in practice). */
  maxAttempts: number;
  /** No attempt starts later than this after the first; the last answer (or failure) is then final. */
  retryForMs: number;
  /** Told when an attempt to API `url` starts (+1) and ends (-1): requests in flight per API. */
  inFlight?: (url: string, delta: 1 | -1) => void;
}

const RETRY_STATUS = new Set([429, 500, 503]);
const BACKOFF_MS = 250;
/** Backoff of a retry without Retry-After (a connection failure, a 500) stops growing here. */
const MAX_BACKOFF_MS = 5_000;
/** A Retry-After longer than this is taken as this (the API sends 2 or 5 s; a bound on the wait). */
const MAX_RETRY_AFTER_MS = 30_000;

function readEnvelope(status: number, body: unknown, requestId: string): Final {
  const e = (body as { error?: Record<string, unknown> } | null)?.error;
  if (!e || typeof e.code !== 'string' || typeof e.message !== 'string' || typeof e.retryable !== 'boolean' || typeof e.requestId !== 'string') {
    return { kind: 'malformed', status, detail: `not an error envelope: ${JSON.stringify(body).slice(0, 200)}` };
  }
  if (!isErrorCode(e.code) || ERROR_STATUS[e.code] !== status) return { kind: 'malformed', status, detail: `code ${e.code} with status ${status}` };
  if (e.requestId !== requestId) return { kind: 'malformed', status, detail: `requestId ${e.requestId}, sent ${requestId}` };
  return { kind: 'answer', status, code: e.code, retryable: e.retryable };
}

function readSuccess(body: unknown, requestId: string): Final {
  const b = body as { usage?: { creditsCharged?: unknown }; meta?: { requestId?: unknown; cacheHit?: unknown } } | null;
  const credits = b?.usage?.creditsCharged;
  if (typeof credits !== 'number' || typeof b?.meta?.cacheHit !== 'boolean') {
    return { kind: 'malformed', status: 200, detail: `200 without usage.creditsCharged/meta.cacheHit: ${JSON.stringify(body).slice(0, 200)}` };
  }
  if (b.meta.requestId !== requestId) return { kind: 'malformed', status: 200, detail: `meta.requestId ${String(b.meta.requestId)}, sent ${requestId}` };
  return { kind: 'answer', status: 200, creditsCharged: credits, cacheHit: b.meta.cacheHit };
}

export async function runCall(call: PlannedCall, opts: ClientOptions): Promise<CallResult> {
  const attempts: Attempt[] = [];
  const payload = JSON.stringify(call.body);
  let final: Final | undefined;
  // The last answer a retried attempt got: if later attempts only fail to connect, that is the answer.
  let lastAnswer: Final | undefined;
  const deadline = Date.now() + opts.retryForMs;
  for (let n = 0; n < opts.maxAttempts && !final; n++) {
    const apis = opts.apis();
    const api = (call.index + n) % apis.length;
    const t0 = performance.now();
    const attempt: Attempt = { api, from: Date.now(), to: 0, ms: 0 };
    attempts.push(attempt);
    let retryAfterMs = Math.min(MAX_BACKOFF_MS, BACKOFF_MS * 2 ** n);
    const url = apis[api]!;
    opts.inFlight?.(url, 1);
    try {
      const res = await fetch(`${url}${call.path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${opts.keyOf(call.user)}`, 'content-type': 'application/json', 'x-request-id': call.requestId },
        body: payload,
        signal: AbortSignal.timeout(opts.timeoutMs),
      });
      const text = await res.text();
      attempt.ms = Math.round(performance.now() - t0);
      attempt.status = res.status;
      if (res.status === 429 || res.status === 503) attempt.retryAfter = res.headers.get('retry-after');
      let body: unknown = null;
      try {
        body = JSON.parse(text);
      } catch {
        // judged below
      }
      const read = res.status === 200 ? readSuccess(body, call.requestId) : readEnvelope(res.status, body, call.requestId);
      if (read.kind === 'answer' && 'code' in read) attempt.code = read.code;
      const ra = Number(res.headers.get('retry-after'));
      if ((read.kind === 'answer' && (read.status === 429 || read.status === 503)) && Number.isFinite(ra) && ra > 0) retryAfterMs = Math.min(MAX_RETRY_AFTER_MS, ra * 1000);
      if (read.kind === 'answer' && RETRY_STATUS.has(read.status) && n + 1 < opts.maxAttempts && Date.now() + retryAfterMs < deadline) {
        lastAnswer = read;
      } else {
        final = read;
      }
    } catch (err) {
      attempt.ms = Math.round(performance.now() - t0);
      const e = err as Error & { cause?: { code?: string; message?: string } };
      if (e.name === 'TimeoutError' || e.name === 'AbortError') {
        attempt.network = 'client timeout';
        final = { kind: 'timeout' };
        break;
      }
      attempt.network = e.cause?.code ?? e.cause?.message ?? e.message;
      if (n + 1 >= opts.maxAttempts || Date.now() + retryAfterMs >= deadline) final = lastAnswer ?? { kind: 'unanswered', detail: attempt.network };
    } finally {
      attempt.to = Date.now();
      opts.inFlight?.(url, -1);
    }
    if (!final) await new Promise((r) => setTimeout(r, retryAfterMs));
  }
  return { call, attempts, final: final ?? { kind: 'unanswered', detail: 'no attempt made' } };
}
