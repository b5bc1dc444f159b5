import pg from 'pg';
import { createClient } from 'redis';

export class HarnessError extends Error {
  override name = 'HarnessError';
}

/** Fails with how to fix it when the Postgres server of `databaseUrl` does not answer. */
export async function assertPostgresAnswers(databaseUrl: string): Promise<void> {
  // Ask the server, not the named database: a fresh machine has no `lenstack` database yet.
  const server = new URL(databaseUrl);
  server.pathname = '/postgres';
  const client = new pg.Client({ connectionString: server.toString(), connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new HarnessError(
      `Postgres at ${safeUrl(databaseUrl)} does not answer: ${message(err)}.\n` +
        `Start it (on our machines: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) ` +
        `or point DATABASE_URL at a running server.`,
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/** Fails with how to fix it when Redis at `redisUrl` does not answer PING. */
export async function assertRedisAnswers(redisUrl: string): Promise<void> {
  const client = createClient({ url: redisUrl, socket: { connectTimeout: 5_000, reconnectStrategy: false } });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    throw new HarnessError(
      `Redis at ${safeUrl(redisUrl)} does not answer: ${message(err)}.\n` +
        `Start it (on our machines: redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" ` +
        `--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log) or point REDIS_URL at a running server.`,
    );
  } finally {
    client.destroy();
  }
}

/** Deletes every key under `prefix` (the run's own keys). */
export async function deleteRedisKeys(redisUrl: string, prefix: string): Promise<number> {
  const client = createClient({ url: redisUrl, socket: { connectTimeout: 5_000, reconnectStrategy: false } });
  client.on('error', () => {});
  await client.connect();
  let deleted = 0;
  try {
    for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      if (keys.length > 0) deleted += await client.unlink(keys);
    }
  } finally {
    client.destroy();
  }
  return deleted;
}

/** The URL without its password, for messages. */
export function safeUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

function message(err: unknown): string {
  if (err instanceof AggregateError) return err.errors.map(message).join('; ');
  return err instanceof Error ? err.message || (err as { code?: string }).code || err.name : String(err);
}
