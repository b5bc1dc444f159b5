import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { freePort, startTemporalDevServer, type DevServer } from '../../tools/scripts/temporal.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { DISTINCT_PHOTOS, photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Temporal itself goes down mid-batch and comes back on its own state file: the batch picks up
 * where it was and completes, every photo billed once. This file runs its own Temporal server so
 * that stopping it disturbs no other test.
 */
let dir: string;
let port: number;
let temporal: DevServer;
let p: Pipeline;
const start = () => startTemporalDevServer({ port, dbFile: join(dir, 'temporal.sqlite') });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lenstack-temporal-restart-'));
  port = await freePort();
  temporal = await start();
  p = await startPipeline({ worker: false, config: { TEMPORAL_ADDRESS: temporal.address, TEMPORAL_NAMESPACE: 'default' } });
  await p.startWorker();
}, 180_000);
afterAll(async () => {
  await p?.close();
  await temporal?.stop();
  await rm(dir, { recursive: true, force: true });
});

const PHOTOS = DISTINCT_PHOTOS.slice(0, 6);

describe('Temporal restarted mid-batch', () => {
  it('the batch completes after the restart, each photo billed once, the ledger balanced', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    p.sim.setBehaviour('all', { latencyMs: 1500 });
    const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { items: PHOTOS.map((f) => ({ base64: photoBase64(f) })), modules: ['dating'] } });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await expect.poll(() => p.sim.stats().openai.calls, { timeout: 30_000, interval: 20 }).toBeGreaterThanOrEqual(2);

    await temporal.stop();
    p.sim.setBehaviour('all', { latencyMs: 0 });
    temporal = await start();

    await expect
      .poll(async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json().status, { timeout: 150_000, interval: 250 })
      .toBe('completed');
    const done = (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json();
    expect(done.counts).toEqual({ total: 6, done: 6, failed: 0, pending: 0 });
    expect(done.creditsCharged).toBe(6);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 14, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
    const reservations = await p.db.query(`SELECT status, count(*)::int AS n FROM reservations WHERE user_id = $1 GROUP BY status`, [user.userId]);
    expect(reservations.rows).toEqual([{ status: 'settled', n: 6 }]);
  }, 240_000);
});
