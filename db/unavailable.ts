/**
 * Whether an error says the database could not be reached or dropped the connection (restarting,
 * in crash recovery, connection refused or reset), as opposed to a query the database refused.
 * The API answers those 503 with Retry-After (docs/decisions.md, "Database unreachable: 503").
 */

/** Node socket errors of a connection that failed or broke. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);
/**
 * SQLSTATEs of a server going away or not yet taking connections: class 08 (connection
 * exception), 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up,
 * in recovery), 53300 too_many_connections (every connection slot taken: busy, not broken).
 */
const SQLSTATES = new Set(['08000', '08001', '08003', '08004', '08006', '57P01', '57P02', '57P03', '53300']);
/**
 * node-postgres's own messages for a connection that ended or never came (they carry no code);
 * "timeout expired" is a lone pg.Client's connect timeout (the pool words its own differently).
 */
const PG_MESSAGES = [/^Connection terminated/, /timeout exceeded when trying to connect/, /^timeout expired$/, /^Client has encountered a connection error/, /^Client was closed/];

export function isDatabaseUnavailable(err: unknown): boolean {
  for (let cur = err, depth = 0; cur && depth < 5; cur = (cur as { cause?: unknown }).cause, depth++) {
    const e = cur as { code?: unknown; message?: unknown; syscall?: unknown };
    if (typeof e.code === 'string' && (SQLSTATES.has(e.code) || (SOCKET_CODES.has(e.code) && typeof e.syscall === 'string'))) return true;
    if (typeof e.message === 'string' && PG_MESSAGES.some((m) => m.test(e.message as string))) return true;
  }
  return false;
}
