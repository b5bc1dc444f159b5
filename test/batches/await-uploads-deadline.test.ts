import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { batchWorkflowId } from '../../batches/submit.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { spawnWorkerProcess } from '../helpers/worker-process.ts';

/**
 * A vehicle of an awaitUploads batch waits for its uploads BATCH_UPLOAD_WAIT_MS from its turn, and
 * no longer (docs/decisions.md, "The fleet's analysis overlaps its uploads"). The deadline is fixed
 * once: a worker that dies mid-wait, and the wait picked up by another, must not start the clock
 * again (a wait restarted by every retry could run far past what the documentation promises).
 */
const WAIT_MS = 20_000;
let p: Pipeline;
const workers: ChildProcess[] = [];
beforeAll(async () => {
  p = await startPipeline({ worker: false, config: { BATCH_UPLOAD_WAIT_MS: WAIT_MS } });
}, 180_000);
afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  await p?.close();
});
const polling = async () => {
  const w = spawnWorkerProcess(p.config, workers);
  await expect.poll(() => w.output(), { timeout: 90_000, interval: 100 }).toContain('polling task queue');
  return w;
};

const get = async (key: string, url: string) => (await p.app.inject({ method: 'GET', url, headers: bearer(key) })).json();
const openHolds = async (accountId: string) => (await p.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM reservations WHERE user_id = $1 AND status = 'open'`, [accountId])).rows[0]!.n;

it('a vehicle whose upload never comes fails BATCH_UPLOAD_WAIT_MS after its turn, though the worker it waited on was killed mid-wait', async () => {
  // Two workers: the one the vehicle's wait is on is killed, the other takes over at once.
  const both = await Promise.all([polling(), polling()]);
  const user = await createTestAccount(p.db, { community: 5 });
  const id = `upl_${randomBytes(16).toString('hex')}`;
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  const batch = res.json();
  // Its turn: the report's price is held, then it waits.
  await expect.poll(() => openHolds(user.userId), { timeout: 60_000, interval: 100 }).toBe(1);
  const turn = Date.now();

  // The worker it waits on (its step's, or the workflow's last task's; identity pid@host) is killed, no clean-up.
  const handle = p.temporal.workflow.getHandle(batchWorkflowId(user.userId, batch.id));
  const onStep = (await handle.describe()).raw.pendingActivities?.[0]?.lastWorkerIdentity;
  const onTask = (await handle.fetchHistory()).events!.filter((e) => e.workflowTaskStartedEventAttributes).at(-1)!.workflowTaskStartedEventAttributes!.identity;
  const pid = Number((onStep || onTask)!.split('@')[0]);
  const busy = both.find((w) => w.child.pid === pid)!;
  expect(busy).toBeDefined();
  busy.child.kill('SIGKILL');

  await expect.poll(async () => (await get(user.liveKey, `/v1/batches/${batch.id}`)).status, { timeout: WAIT_MS + 45_000, interval: 250 }).toBe('completed');
  const failedAfter = Date.now() - turn;
  const [item] = (await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items;
  expect(item).toMatchObject({ source: 'van', status: 'failed', creditsCharged: 0, error: { code: 'VALIDATION_FAILED' } });
  expect(item.error.message).toContain(`upload ${id} did not finish within 20 seconds of its vehicle's turn`);
  // From its turn, not from a retry on the other worker (which a killed worker's step gets only
  // after its heartbeat timeout, a minute): the slack covers the server handing the killed
  // worker's sticky workflow task to the other (10 s) and a busy machine.
  expect(failedAfter).toBeLessThan(WAIT_MS + 20_000);
  expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
}, 180_000);
