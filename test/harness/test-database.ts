import { randomBytes } from 'node:crypto';
import pg from 'pg';

const PREFIX = 'lenstack_test_';
const KEPT_COMMENT = 'kept by KEEP_TEST_DB';

export interface TestDatabase {
  name: string;
  url: string;
  /** Drops the database (terminating leftover connections), or keeps it when `keep`. */
  dispose(opts: { keep: boolean }): Promise<void>;
}

/**
 * Creates `lenstack_test_<pid>_<random>` on the server of `serverUrl`. Databases left by runs
 * that were killed before their teardown (their pid is gone) are dropped first.
 */
export async function createTestDatabase(serverUrl: string): Promise<TestDatabase> {
  const name = `${PREFIX}${process.pid}_${randomBytes(4).toString('hex')}`;
  await withAdmin(serverUrl, async (admin) => {
    await dropAbandoned(admin, serverUrl);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  });
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    dispose: ({ keep }) =>
      withAdmin(serverUrl, async (admin) => {
        if (keep) {
          await admin.query(`COMMENT ON DATABASE ${pg.escapeIdentifier(name)} IS '${KEPT_COMMENT}'`);
        } else {
          await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
        }
      }),
  };
}

async function withAdmin<T>(serverUrl: string, fn: (admin: pg.Client) => Promise<T>): Promise<T> {
  const url = new URL(serverUrl);
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5_000 });
  admin.on('error', () => {});
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end().catch(() => {});
  }
}

/**
 * Only on a server on this machine (pids mean nothing elsewhere), and never a database that was
 * kept on purpose or that anything is still connected to.
 */
async function dropAbandoned(admin: pg.Client, serverUrl: string): Promise<void> {
  if (!isLoopback(new URL(serverUrl).hostname)) return;
  const { rows } = await admin.query<{ datname: string; comment: string | null; connections: number }>(
    `SELECT d.datname, shobj_description(d.oid, 'pg_database') AS comment,
            (SELECT count(*)::int FROM pg_stat_activity a WHERE a.datname = d.datname) AS connections
       FROM pg_database d WHERE d.datname LIKE $1`,
    [`${PREFIX}%`],
  );
  for (const row of rows) {
    const pid = Number(/^lenstack_test_(\d+)_/.exec(row.datname)?.[1]);
    if (!pid || row.comment === KEPT_COMMENT || row.connections > 0 || isAlive(pid)) continue;
    // Another run may be sweeping the same leftover at the same moment: losing that race is fine.
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(row.datname)}`).catch(() => {});
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '[::1]' || host === '::1';
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
