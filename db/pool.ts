import pg from 'pg';

// int8 (bigint) columns carry credits and counts far below 2^53; read them as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Db = pg.Pool;
export type DbClient = pg.PoolClient;

export function createPool(databaseUrl: string, opts: { max?: number; application?: string } = {}): Db {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: opts.max ?? 10,
    application_name: opts.application ?? 'lenstack',
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  // Nor one a library holds checked out between its queries (better-auth's Kysely takes clients
  // with pool.connect() for its transactions and listens for nothing): the lost connection fails
  // the next query ("not queryable", a 503: db/unavailable.ts) and the pool drops the client when
  // it is released. Before, a reset there was an unhandled 'error' and ended the console.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  return pool;
}

/**
 * Run `fn` in a transaction; rolls back on any throw. A checked-out client has no pool 'error'
 * listener, so a connection lost mid-transaction (reset, backend killed) would be an unhandled
 * 'error' event that kills the process: listen while it is ours (the failed query rejects
 * anyway), and hand a broken client back with its error so the pool discards it.
 */
export async function inTransaction<T>(db: Db, fn: (c: DbClient) => Promise<T>): Promise<T> {
  const { client, release } = await checkOut(db);
  let rollbackFailed: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackErr: Error) => {
      rollbackFailed = rollbackErr;
    });
    throw err;
  } finally {
    release(rollbackFailed);
  }
}

/**
 * A client checked out by hand (a transaction whose shape inTransaction does not fit), guarded as
 * inTransaction's is: a connection lost while it is ours is recorded, not an unhandled 'error'
 * that ends the process, and `release` hands it back with that error (or the one it is given, a
 * failed ROLLBACK's) so the pool discards it.
 */
export async function checkOut(db: Db): Promise<{ client: DbClient; release: (err?: Error) => void }> {
  const client = await db.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken ??= err;
  };
  client.on('error', onError);
  return {
    client,
    release(err?: Error) {
      client.removeListener('error', onError);
      client.release(broken ?? err);
    },
  };
}
