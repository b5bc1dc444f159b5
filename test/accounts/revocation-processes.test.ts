import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueKey, listKeys, revokeKey } from '../../auth/repository.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { freePort } from '../../scripts/temporal.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, createTestUser, INTERNAL_SECRET } from '../helpers/app.ts';

/**
 * Four real API processes (`node --import tsx api/server.ts`) on one Postgres and one Redis, as in
 * production (DESIGN "Where it goes next"): each keeps its own in-memory key cache.
 */
const PROCESSES = 4;
const config = testConfig({ INTERNAL_SECRET });
let db: Db;
const apis: Array<{ url: string; child: ChildProcess; stderr: string[] }> = [];

/** Start one API process and resolve once it logs that it listens (or reject when it exits first). */
async function startApiProcess(): Promise<(typeof apis)[number]> {
  const port = await freePort();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    NODE_ENV: 'test',
    LOG_LEVEL: 'info', // its "Server listening" line is how we know it is up
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: config.DATABASE_URL,
    REDIS_URL: config.REDIS_URL,
    REDIS_PREFIX: config.REDIS_PREFIX,
    TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS!,
    TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE: config.TEMPORAL_TASK_QUEUE,
    BLOB_DIR: config.BLOB_DIR,
    INTERNAL_SECRET,
  };
  const child = spawn(process.execPath, ['--import', 'tsx', 'api/server.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const stderr: string[] = [];
  child.stderr!.on('data', (b: Buffer) => stderr.push(b.toString()));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('Server listening at')) {
        out = '';
        resolve();
      }
      // Keep only a tail: request logs keep coming after start-up and are not needed.
      if (out.length > 100_000) out = out.slice(-1_000);
    });
    child.once('exit', (code) => reject(new Error(`API process exited with ${code} before listening: ${stderr.join('').slice(-2000)}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child, stderr };
}

const statusOf = (url: string, key: string) =>
  fetch(`${url}/v1/usage`, { headers: bearer(key) }).then(
    (r) => r.status,
    () => 0,
  );

beforeAll(async () => {
  db = createPool(config.DATABASE_URL, { max: 4 });
  const started = await Promise.allSettled(Array.from({ length: PROCESSES }, startApiProcess));
  for (const s of started) if (s.status === 'fulfilled') apis.push(s.value);
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}, 180_000);

afterAll(async () => {
  await Promise.all(
    apis.map(async ({ child }) => {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }),
  );
  await db?.end();
});

describe('key revocation across API processes', () => {
  it('a key revoked through one process is refused by every one of 4 processes within 1 s', async () => {
    const user = await createTestUser(db);
    const control = await issueKey(db, user.userId, 'live', 'control');
    const liveId = (await listKeys(db, user.userId)).find((k) => k.kind === 'live' && k.name === null)!.id;

    // Every process authenticates both keys once and caches them.
    for (const { url } of apis) {
      expect(await statusOf(url, user.liveKey)).toBe(200);
      expect(await statusOf(url, control.key)).toBe(200);
    }
    // Control: revoked in the database without any broadcast, every process still serves it from
    // its cache. So the 401s below come from the eviction broadcast, not from a database lookup.
    await revokeKey(db, control.keyId);
    for (const { url } of apis) expect(await statusOf(url, control.key)).toBe(200);

    const res = await fetch(`${apis[0]!.url}/v1/internal/accounts/${user.userId}/keys/${liveId}`, {
      method: 'DELETE',
      headers: { 'x-internal-secret': INTERNAL_SECRET },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { apiProcessesNotified: number }).apiProcessesNotified).toBe(PROCESSES);
    await Promise.all(apis.map(({ url }) => expect.poll(() => statusOf(url, user.liveKey), { timeout: 1_000, interval: 20 }).toBe(401)));

    // The user's other key is untouched everywhere.
    for (const { url } of apis) expect(await statusOf(url, user.testKey)).toBe(200);
  });
});
