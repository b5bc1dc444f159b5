import pg from 'pg';

/**
 * An advisory lock held by a connection of its own, outside the pool: taken at once or not at all,
 * and given up when released or when its holder dies (Postgres ends the session and the lock with
 * it), so a process killed mid-work never leaves it held. Outside the pool because the work it
 * guards needs the pool's connections itself: held pool clients could starve it.
 */
export interface SessionLock {
  release(): Promise<void>;
}

export async function trySessionLock(databaseUrl: string, name: string): Promise<SessionLock | null> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'lenstack-session-lock', connectionTimeoutMillis: 10_000 });
  // A lost connection loses the lock; it must not crash the process.
  client.on('error', () => {});
  await client.connect();
  try {
    const got = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [name]);
    if (!got.rows[0]!.ok) {
      await client.end();
      return null;
    }
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  return { release: () => client.end().catch(() => undefined) };
}
