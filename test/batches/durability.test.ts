import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { spawnWorkerProcess } from '../helpers/worker-process.ts';

/**
 * A batch outlives its workers: one is killed (SIGKILL, no cleanup) while photos are at the
 * vendor, another takes over, and the batch completes with every photo billed once. Runs of 3
 * photos make it continue as new several times on the way.
 */
let p: Pipeline;
const workers: ChildProcess[] = [];

const spawnWorker = () => spawnWorkerProcess(p.config, workers);

beforeAll(async () => {
  p = await startPipeline({ worker: false, config: { BATCH_PHOTOS_PER_RUN: 3 } });
}, 120_000);
afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  await p?.close();
});

const PHOTOS = ['Canon_40D.jpg', 'Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0010.jpg', 'gps-DSCN0012.jpg', 'gps-DSCN0021.jpg', 'hdr-canon_hdr_NO.jpg', 'mobile-jolla.jpg'];

describe('a batch and a worker killed mid-batch', () => {
  it('completes on another worker, each photo billed once, the ledger balanced, its history cut into runs', async () => {
    const user = await createTestAccount(p.db, { community: 50 });
    p.sim.setBehaviour('all', { latencyMs: 1500 });
    const first = spawnWorker();
    await expect.poll(() => first.output(), { timeout: 60_000, interval: 100 }).toContain('polling task queue');

    const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { items: PHOTOS.map((f) => ({ base64: photoBase64(f) })), modules: ['dating'] } });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    // Photos are at the vendor on the first worker: kill it without any chance to clean up.
    await expect.poll(() => p.sim.stats().openai.calls, { timeout: 30_000, interval: 20 }).toBeGreaterThanOrEqual(2);
    first.child.kill('SIGKILL');
    p.sim.setBehaviour('all', { latencyMs: 0 });
    const second = spawnWorker();
    await expect.poll(() => second.output(), { timeout: 60_000, interval: 100 }).toContain('polling task queue');

    await expect
      .poll(async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json().status, { timeout: 120_000, interval: 250 })
      .toBe('completed');
    const done = (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json();
    expect(done.counts).toEqual({ total: 8, done: 8, failed: 0, pending: 0 });
    expect(done.creditsCharged).toBe(8);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 42, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
    const reservations = await p.db.query(`SELECT status, count(*)::int AS n FROM reservations WHERE user_id = $1 GROUP BY status`, [user.userId]);
    expect(reservations.rows).toEqual([{ status: 'settled', n: 8 }]);

    // 8 photos at 3 per run: the workflow continued as new at least twice.
    // Temporal's visibility store lags its history by a moment on a loaded machine: poll it.
    const runs = async () => {
      const out: string[] = [];
      for await (const w of p.temporal.workflow.list({ query: `WorkflowId = 'batch:${user.userId}:${id}'` })) out.push(w.status.name ?? '');
      return out;
    };
    await expect.poll(async () => (await runs()).includes('COMPLETED'), { timeout: 30_000, interval: 200 }).toBe(true);
    expect((await runs()).filter((s) => s === 'CONTINUED_AS_NEW').length).toBeGreaterThanOrEqual(2);
    // The killed worker's activities are retried only once Temporal times them out: the test waits
    // on those timeouts (its polls allow 60 + 120 s), not on the 30 s default of a quick test.
  }, 240_000);
});
