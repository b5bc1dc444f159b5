import pg from 'pg';

/**
 * An advisory lock held by a connection of its own, outside the pool: taken at once or not at all,
 * and given up when released or when its holder dies (Postgres ends the session and the lock with
 * it), so a process killed mid-work never leaves it held. Outside the pool because the work it
 * guards needs the pool's connections itself: held pool clients could starve it.
 *
 * The session never times out for idleness (it is idle while the work runs), and the server probes
 * its client every 10 s after 30 s of silence, so a holder whose host vanished (no FIN, no RST)
 * gives the lock up within a minute or so rather than at the OS's two-hour default. `lost` turns
 * true when the connection broke: the lock is gone and the holder must not act as if it held it.
 */
export interface SessionLock {
  readonly lost: boolean;
  /** Gives the lock up; never waits long for a connection that stopped answering. */
  release(): Promise<void>;
}

const SESSION_OPTIONS = '-c idle_session_timeout=0 -c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3';

export async function trySessionLock(databaseUrl: string, name: string): Promise<SessionLock | null> {
  const client = new pg.Client({
    connectionString: databaseUrl,
    application_name: 'lenstack-session-lock',
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
    options: SESSION_OPTIONS,
  });
  let lost = false;
  // A lost connection loses the lock; it must not crash the process.
  client.on('error', () => void (lost = true));
  client.on('end', () => void (lost = true));
  let ok: boolean;
  try {
    await client.connect();
    ok = (await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [name])).rows[0]!.ok;
  } catch (err) {
    // A refused or timed-out connection, too many clients, a restart: db/unavailable.ts knows them
    // all, and the error handling answers them 503 with Retry-After, as for the pool's own.
    void client.end().catch(() => undefined);
    throw err;
  }
  if (!ok) {
    void client.end().catch(() => undefined);
    return null;
  }
  return {
    get lost() {
      return lost;
    },
    async release() {
      // Ending the session gives the lock up; a connection that stopped answering is cut after 2 s.
      const ended = client.end().catch(() => undefined);
      const cut = setTimeout(() => (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy(), 2_000);
      await ended;
      clearTimeout(cut);
    },
  };
}
