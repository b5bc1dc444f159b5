import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_CACHE_TTL_MS } from '../../auth/cache.ts';
import { issueKey, listKeys, revokeKey } from '../../auth/repository.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, createTestAccount, INTERNAL_SECRET } from '../helpers/app.ts';
import { apiUrl, serviceEnv, spawnService, stopGracefully } from '../helpers/processes.ts';

/**
 * Four real API processes (`node --import tsx api/server.ts`) on one Postgres and one Redis, as in
 * production (docs/architecture.md): each keeps its own in-memory key cache.
 */
const PROCESSES = 4;
/** How long the processes get to hear the eviction: a correctness window, not a latency bound. */
const EVICTED_WITHIN_MS = 30_000;
const config = testConfig({ INTERNAL_SECRET });
let db: Db;
const apis: Array<{ url: string; child: ChildProcess }> = [];

/** Start one API process and resolve once it logs that it listens (or reject when it exits first). */
async function startApiProcess(): Promise<(typeof apis)[number]> {
  const api = spawnService('api/server.ts', serviceEnv(config));
  return { url: await apiUrl(api), child: api.child };
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
  await Promise.all(apis.map(({ child }) => stopGracefully(child)));
  await db?.end();
});

describe('key revocation across API processes', () => {
  it('a key revoked through one process is refused by every one of 4 processes, by the broadcast', async () => {
    const user = await createTestAccount(db);
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
    // Waited for well below the 5 min cache TTL (and the control above shows the database alone
    // changes nothing), so the 401s are the broadcast's; how fast they come: bench/timings.ts.
    expect(EVICTED_WITHIN_MS * 10).toBeLessThanOrEqual(KEY_CACHE_TTL_MS);
    await Promise.all(apis.map(({ url }) => expect.poll(() => statusOf(url, user.liveKey), { timeout: EVICTED_WITHIN_MS, interval: 20 }).toBe(401)));

    // The user's other key is untouched everywhere.
    for (const { url } of apis) expect(await statusOf(url, user.testKey)).toBe(200);
  });
});
