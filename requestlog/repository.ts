import type { Db } from '../db/pool.ts';
import { AppError } from '../core/errors.ts';

/** How long the request log keeps a row (docs/decisions.md "The console's Requests log"). */
export const REQUEST_LOG_DAYS = 30;

/** One row of the console's Requests section. */
export interface RequestRow {
  id: string;
  at: string;
  key: { id: string; label: string; name: string | null };
  operation: string;
  status: number;
  errorCode: string | null;
  credits: number | null;
  latencyMs: number;
  requestId: string;
  analysisId: string | null;
}

export interface RequestFilter {
  /** `ok` (below 400), `error` (400 and above), or one status code. */
  status?: 'ok' | 'error' | number;
  keyId?: string;
  operation?: string;
  /** Inclusive lower and exclusive upper bound; both clamped to the last 30 days. */
  from?: Date;
  to?: Date;
}

/**
 * The keyset cursor: the last row's time in microseconds since the epoch (Postgres's precision,
 * not a JavaScript Date's) and its id, opaque to the console.
 */
const encodeCursor = (row: { atUs: string; id: string }): string => Buffer.from(`${row.atUs}|${row.id}`).toString('base64url');
function decodeCursor(cursor: string): { atUs: string; id: string } {
  const [atUs, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  if (!atUs || !id || !/^\d{1,19}$/.test(atUs) || !/^\d{1,19}$/.test(id)) throw new AppError('VALIDATION_FAILED', 'cursor: not a cursor this list gave');
  return { atUs, id };
}

/**
 * The key id a console Playground run is logged under (`console:test`, `console:live`): the console
 * runs the analyze use case with no key (web/routes/playground.ts), and its runs are listed as such.
 */
export const CONSOLE_KEY_PREFIX = 'console:';

/**
 * One console Playground request into the log, written at once (a member waits on their own run;
 * no buffer): the API's rows come through requestlog/buffer.ts, which keeps only rows of existing keys.
 */
export async function recordConsoleRequest(
  db: Db,
  row: { userId: string; mode: 'test' | 'live'; status: number; errorCode: string | null; credits: number | null; latencyMs: number; requestId: string; analysisId: string | null; error: string | null },
): Promise<void> {
  await db.query(
    `INSERT INTO api_requests (user_id, at, key_id, operation, method, status, error_code, credits, latency_ms, request_id, analysis_id, error)
     VALUES ($1, now(), $2, 'consolePlayground', 'POST', $3, $4, $5, $6, $7, $8, $9::jsonb)`,
    [row.userId, `${CONSOLE_KEY_PREFIX}${row.mode}`, row.status, row.errorCode, row.credits, row.latencyMs, row.requestId, row.analysisId, row.error],
  );
}

const COLUMNS = `r.id::text AS id, r.at, (extract(epoch FROM r.at) * 1000000)::bigint::text AS at_us, r.key_id, k.prefix, k.last4, k.name, r.operation, r.status, r.error_code, r.credits, r.latency_ms, r.request_id, r.analysis_id`;
interface DbRow {
  id: string;
  at: Date;
  at_us: string;
  key_id: string;
  prefix: string | null;
  last4: string | null;
  name: string | null;
  operation: string;
  status: number;
  error_code: string | null;
  credits: number | null;
  latency_ms: number;
  request_id: string;
  analysis_id: string | null;
}
const toRow = (row: DbRow): RequestRow => ({
  id: row.id,
  at: row.at.toISOString(),
  key: { id: row.key_id, label: row.prefix ? `${row.prefix}…${row.last4 ?? ''}` : row.key_id.startsWith(CONSOLE_KEY_PREFIX) ? `console Playground (${row.key_id.slice(CONSOLE_KEY_PREFIX.length)})` : 'deleted key', name: row.name },
  operation: row.operation,
  status: row.status,
  errorCode: row.error_code,
  credits: row.credits,
  latencyMs: row.latency_ms,
  requestId: row.request_id,
  analysisId: row.analysis_id,
});

/**
 * A workspace's requests, newest first, a page at a time: keyset pagination on (at, id), which
 * the index api_requests_workspace_time serves, so page 100 costs what page 1 does.
 */
export async function listRequests(db: Db, workspaceId: string, filter: RequestFilter, page: { limit: number; cursor?: string }, now = new Date()): Promise<{ requests: RequestRow[]; next: string | null }> {
  const since = new Date(now.getTime() - REQUEST_LOG_DAYS * 86_400_000);
  const where = ['r.user_id = $1', 'r.at >= $2'];
  const params: unknown[] = [workspaceId, filter.from && filter.from > since ? filter.from : since];
  const add = (sql: (n: number) => string, value: unknown) => {
    params.push(value);
    where.push(sql(params.length));
  };
  if (filter.to) add((n) => `r.at < $${n}`, filter.to);
  if (filter.status === 'ok') where.push('r.status < 400');
  else if (filter.status === 'error') where.push('r.status >= 400');
  else if (typeof filter.status === 'number') add((n) => `r.status = $${n}`, filter.status);
  if (filter.keyId) add((n) => `r.key_id = $${n}`, filter.keyId);
  if (filter.operation) add((n) => `r.operation = $${n}`, filter.operation);
  if (page.cursor) {
    const c = decodeCursor(page.cursor);
    params.push(c.atUs, c.id);
    where.push(`(r.at, r.id) < (timestamptz 'epoch' + $${params.length - 1}::bigint * interval '1 microsecond', $${params.length}::bigint)`);
  }
  params.push(page.limit + 1);
  const r = await db.query<DbRow>(
    `SELECT ${COLUMNS} FROM api_requests r LEFT JOIN api_keys k ON k.id = r.key_id
      WHERE ${where.join(' AND ')}
      ORDER BY r.at DESC, r.id DESC
      LIMIT $${params.length}`,
    params,
  );
  const last = r.rows[page.limit - 1];
  return { requests: r.rows.slice(0, page.limit).map(toRow), next: r.rows.length > page.limit && last ? encodeCursor({ atUs: last.at_us, id: last.id }) : null };
}

/**
 * One request with what it answered: the error envelope it was refused with, or the stored
 * analysis (analysis_requests.response) for a request that succeeded and stored one.
 */
export async function requestDetail(db: Db, workspaceId: string, id: string): Promise<RequestRow & { error: unknown; analysis: unknown }> {
  if (!/^\d{1,19}$/.test(id)) throw new AppError('NOT_FOUND', 'No such request');
  const r = await db.query<DbRow & { error: unknown; analysis: unknown }>(
    `SELECT ${COLUMNS}, r.error,
            CASE WHEN r.error IS NULL THEN (SELECT a.response FROM analysis_requests a WHERE a.user_id = r.user_id AND a.request_id = r.request_id) END AS analysis
       FROM api_requests r LEFT JOIN api_keys k ON k.id = r.key_id
      WHERE r.user_id = $1 AND r.id = $2 AND r.at >= now() - make_interval(days => $3)`,
    [workspaceId, id, REQUEST_LOG_DAYS],
  );
  const row = r.rows[0];
  if (!row) throw new AppError('NOT_FOUND', 'No such request');
  return { ...toRow(row), error: row.error, analysis: row.analysis ?? null };
}

/** Distinct operations of the workspace's last 30 days, for the filter's choices. */
export async function requestOperations(db: Db, workspaceId: string): Promise<string[]> {
  const r = await db.query<{ operation: string }>(
    `SELECT DISTINCT operation FROM api_requests WHERE user_id = $1 AND at >= now() - make_interval(days => $2) ORDER BY operation`,
    [workspaceId, REQUEST_LOG_DAYS],
  );
  return r.rows.map((x) => x.operation);
}

/** The collector's sweep: rows older than 30 days go, 5,000 a statement so no lock is held long. */
export async function sweepRequestLog(db: Db, now = new Date()): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await db.query(
      `DELETE FROM api_requests WHERE id IN (SELECT id FROM api_requests WHERE at < $1::timestamptz - make_interval(days => $2) LIMIT 5000)`,
      [now, REQUEST_LOG_DAYS],
    );
    total += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < 5000) return total;
  }
}
