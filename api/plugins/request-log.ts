import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RequestLog } from '../../requestlog/buffer.ts';
import type { Db } from '../../db/pool.ts';
import type { ApiMetrics } from '../../metrics/api.ts';

declare module 'fastify' {
  interface FastifyInstance {
    requestLog: RequestLog;
  }
}

/** What a route knows of its own answer that the log keeps: credits charged, the analysis id. */
const outcomes = new WeakMap<FastifyRequest, { credits: number; analysisId: string | null }>();

/** A route tells the request log what it charged and which stored analysis it answered with. */
export function noteRequestOutcome(request: FastifyRequest, outcome: { credits: number; analysisId: string | null }): void {
  outcomes.set(request, outcome);
}

/**
 * The API process's request log over `db`, counted in `lenstack_request_log_rows_total`
 * (written, dropped_full, dropped_db); a failed write is logged once per flush, not per row.
 */
export function requestLogFor(db: Db, metrics: ApiMetrics, warn: (err: unknown, rows: number) => void): RequestLog {
  return new RequestLog(db, {
    onWritten: (rows) => metrics.requestLogRows.inc({ outcome: 'written' }, rows),
    onDrop: (reason, rows, err) => {
      metrics.requestLogRows.inc({ outcome: `dropped_${reason}` }, rows);
      if (err) warn(err, rows);
    },
  });
}

/**
 * An envelope is kept up to 2 KiB (ours are a few hundred bytes), so the buffer's 10,000 rows hold
 * at most ~20 MB; a larger one keeps its code only. Bodies past 64 KiB are not read at all.
 */
const MAX_KEPT_ENVELOPE = 2 * 1024;
const MAX_READ_ENVELOPE = 64 * 1024;

/**
 * Every request made with a workspace's key goes into the request log (requestlog/buffer.ts,
 * docs/decisions.md "The console's Requests log"): one push to a bounded buffer in onResponse,
 * nothing awaited. Kept: time, key id, operation, status, error code and envelope, credits,
 * latency, request id. Never the Authorization header, the body or image bytes. Requests without
 * a workspace key (unauthenticated, the anonymous sandbox key, the internal secret) are not kept.
 */
export function registerRequestLog(app: FastifyInstance, log: RequestLog): void {
  const envelopes = new WeakMap<FastifyRequest, string>();
  // A refusal's envelope, as sent: read from the serialized payload, the one place every error
  // path (routes, hooks, the framework's own refusals) passes through.
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode >= 400 && typeof payload === 'string' && payload.length <= MAX_READ_ENVELOPE && request.principal?.accountId && !request.principal.anonymous) {
      envelopes.set(request, payload);
    }
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    const principal = request.principal;
    if (!principal?.accountId || principal.anonymous) return;
    const envelope = parsedEnvelope(envelopes.get(request));
    const outcome = outcomes.get(request);
    log.record({
      userId: principal.accountId,
      at: new Date(Date.now() - reply.elapsedTime),
      keyId: principal.keyId,
      operation: request.routeOptions.schema?.operationId ?? `${request.method} ${request.routeOptions.url ?? '?'}`,
      method: request.method,
      status: reply.statusCode,
      errorCode: envelope?.code ?? null,
      credits: outcome?.credits ?? (reply.statusCode >= 400 ? 0 : null),
      latencyMs: Math.max(0, Math.round(reply.elapsedTime)),
      requestId: request.id,
      analysisId: outcome?.analysisId ?? null,
      error: envelope?.text ?? null,
    });
  });
  app.addHook('onClose', async () => log.close());
}

/** The envelope's text and code, or null for a body that is not a JSON error envelope. */
function parsedEnvelope(text: string | undefined): { text: string | null; code: string | null } | null {
  if (text === undefined) return null;
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown } } | null;
    if (typeof body !== 'object' || body === null || typeof body.error !== 'object') return null;
    return { text: text.length <= MAX_KEPT_ENVELOPE ? text : null, code: typeof body.error.code === 'string' ? body.error.code : null };
  } catch {
    return null;
  }
}
