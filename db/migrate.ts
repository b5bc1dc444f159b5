import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runner } from 'node-pg-migrate';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations', import.meta.url));

/** The database named in `databaseUrl`, and a client of the `postgres` database on its server. */
async function adminFor(databaseUrl: string): Promise<{ name: string; client: pg.Client }> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error(`DATABASE_URL has no database name: ${url.origin}`);
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  return { name, client };
}

/** Create the database named in `databaseUrl` when it does not exist yet (first `npm start`). */
export async function createDatabaseIfMissing(databaseUrl: string): Promise<boolean> {
  const { name, client } = await adminFor(databaseUrl);
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount) return false;
    try {
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
    } catch (err) {
      // Another process created it between our check and our CREATE.
      if ((err as { code?: string }).code !== '42P04') throw err;
      return false;
    }
    return true;
  } finally {
    await client.end();
  }
}

/** Drop the database named in `databaseUrl` (a scratch database of a bench, chaos run or test), sessions and all. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const { name, client } = await adminFor(databaseUrl);
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Our own advisory lock key for migrations (any constant; distinct from node-pg-migrate's). */
const MIGRATE_LOCK = 7_151_102;

/**
 * Apply every pending migration (node-pg-migrate, SQL files under db/migrations). node-pg-migrate
 * refuses at once ("Another migration is already running") when another process migrates the same
 * database; processes starting together (an API, a worker, an admin command) wait their turn on a
 * blocking advisory lock instead, and the later ones find nothing to do.
 */
export async function migrate(databaseUrl: string, log: (msg: string) => void = () => {}): Promise<void> {
  const lock = new pg.Client({ connectionString: databaseUrl, application_name: 'lenstack-migrate-lock' });
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATE_LOCK]);
    await runner({
      databaseUrl,
      dir: MIGRATIONS_DIR,
      direction: 'up',
      migrationsTable: 'pgmigrations',
      count: Infinity,
      singleTransaction: true,
      checkOrder: true,
      log,
      noLock: false,
    });
  } finally {
    // Ending the session releases the lock.
    await lock.end();
  }
}
