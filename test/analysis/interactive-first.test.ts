import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_CONCURRENCY } from '../../batches/submit.ts';
import { interactiveTaskQueue } from '../../core/config.ts';
import { VENDOR_ACTIVITY } from '../../core/vendor-names.ts';
import { startWorker } from '../../worker/main.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { DISTINCT_PHOTOS, photoBase64 } from '../helpers/photos.ts';
import { startPipeline, workflowBundle, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Interactive work is dispatched ahead of batch work (docs/decisions.md, "Interactive work ahead
 * of batches"). A worker whose activity slots a batch has filled, with more of the batch's vendor
 * calls queued behind them, still runs a single analysis started after the batch at once: the
 * analysis runs on the interactive task queue, with slots of its own. Real Temporal dev server,
 * real worker, vendors simulated at the wire. The simulator holds every vendor call until the test
 * releases it, so "the slots are full" is a fact the test reads from Temporal, not a bet on latency.
 */
let p: Pipeline;
beforeAll(async () => {
  // One vendor: each attempt may take 50 s of the 10-minute workflow timeout (workflows/deadlines.ts),
  // ample for a call the simulator holds while the test looks.
  p = await startPipeline({ worker: false, config: { VENDOR_ORDER: 'openai' } });
  // One activity slot on each of the worker's queues: the batch's first vendor call fills its own.
  p.worker = await startWorker(p.config, { workflowBundle: await workflowBundle(), log: () => {}, activitySlots: 1 });
}, 120_000);
afterAll(async () => {
  p?.sim.release();
  await p?.close();
});

// temporal.api.enums.v1.PendingActivityState (the proto package is not a direct dependency).
const SCHEDULED = 1;
const STARTED = 2;
const VENDOR_ACTIVITIES = new Set<string>(Object.values(VENDOR_ACTIVITY));
const handle = (workflowId: string) => p.temporal.workflow.getHandle(workflowId);

/** States of the workflow's pending vendor activities (none while it is not started yet). */
async function vendorActivityStates(workflowId: string): Promise<number[]> {
  const described = await handle(workflowId).describe().catch(() => null);
  return (described?.raw.pendingActivities ?? []).filter((a) => VENDOR_ACTIVITIES.has(a.activityType?.name ?? '')).map((a) => Number(a.state));
}

/** When the workflow's one vendor activity started, by Temporal's record (nanoseconds). */
async function vendorCallStartedAt(workflowId: string): Promise<bigint> {
  const events = (await handle(workflowId).fetchHistory()).events ?? [];
  const scheduled = new Set(events.filter((e) => VENDOR_ACTIVITIES.has(e.activityTaskScheduledEventAttributes?.activityType?.name ?? '')).map((e) => String(e.eventId)));
  const started = events.filter((e) => scheduled.has(String(e.activityTaskStartedEventAttributes?.scheduledEventId)));
  expect(started, workflowId).toHaveLength(1);
  const at = started[0]!.eventTime!;
  return BigInt(String(at.seconds)) * 1_000_000_000n + BigInt(at.nanos ?? 0);
}

describe('interactive work ahead of batch work', () => {
  it('a single analysis started while a batch fills the worker’s slots runs before the batch’s queued vendor calls', async () => {
    const batchAccount = await createTestAccount(p.db, { community: 100 });
    const liveAccount = await createTestAccount(p.db, { community: 100 });
    const photos = DISTINCT_PHOTOS.slice(0, BATCH_CONCURRENCY);
    p.sim.hold();
    let childIds: string[] = [];
    let batchId = '';
    const requestId = `interactive-${liveAccount.userId}`;
    const interactiveId = `analyze:${liveAccount.userId}:${requestId}`;
    try {
      const submitted = await p.app.inject({
        method: 'POST',
        url: '/v1/batches',
        headers: bearer(batchAccount.liveKey),
        payload: { items: photos.map((f) => ({ base64: photoBase64(f), name: f })), modules: ['dating'] },
      });
      expect(submitted.statusCode, submitted.body).toBe(202);
      batchId = submitted.json().id as string;
      const batchWorkflowId = `batch:${batchAccount.userId}:${batchId}`;
      const children = async () => ((await handle(batchWorkflowId).describe().catch(() => null))?.raw.pendingChildren ?? []).map((c) => c.workflowId!);

      // Every photo of the batch at its vendor call: one in the queue's only slot (held by the
      // simulator), the others scheduled behind it.
      const batchQueued = [...Array<number>(photos.length - 1).fill(SCHEDULED), STARTED];
      const batchStates = async () => (await Promise.all((await children()).map(vendorActivityStates))).flat().sort((a, b) => a - b);
      await expect.poll(batchStates, { timeout: 60_000, interval: 200 }).toEqual(batchQueued);
      // Started by Temporal is not yet at the vendor: the activity reads and decodes the photo first.
      await expect.poll(() => p.sim.held(), { timeout: 30_000, interval: 100 }).toBe(1);
      expect(await batchStates()).toEqual(batchQueued);
      childIds = await children();
      expect(childIds).toHaveLength(photos.length);

      // Then a single analysis. Its vendor call is started at once, in a slot of its own, and
      // reaches the vendor while the batch's queued calls still wait for theirs. On the batch's
      // queue it would be scheduled behind them, and stay so while the simulator holds the call
      // in the slot.
      const answer = p.app.inject({
        method: 'POST',
        url: '/v1/analyze',
        headers: { ...bearer(liveAccount.liveKey), 'x-request-id': requestId },
        payload: { imageBase64: photoBase64(DISTINCT_PHOTOS[photos.length]!), modules: ['dating'] },
      });
      await expect.poll(() => vendorActivityStates(interactiveId), { timeout: 30_000, interval: 100 }).toEqual([STARTED]);
      await expect.poll(() => p.sim.held(), { timeout: 30_000, interval: 100 }).toBe(2);
      expect(await batchStates()).toEqual(batchQueued);

      p.sim.release();
      const analysed = await answer;
      expect(analysed.statusCode, analysed.body).toBe(200);
    } finally {
      p.sim.release();
    }
    const batchStatus = async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${batchId}`, headers: bearer(batchAccount.liveKey) })).json();
    await expect.poll(async () => (await batchStatus()).status, { timeout: 90_000, interval: 200 }).toBe('completed');
    expect((await batchStatus()).counts).toEqual({ total: photos.length, done: photos.length, failed: 0, pending: 0 });

    // Temporal's record of what ran when: of the batch's calls, only the one already in the slot
    // started before the single analysis's call.
    const interactiveAt = await vendorCallStartedAt(interactiveId);
    const batchAt = await Promise.all(childIds.map(vendorCallStartedAt));
    expect(batchAt.filter((at) => at < interactiveAt)).toHaveLength(1);
    expect(batchAt.filter((at) => at > interactiveAt)).toHaveLength(photos.length - 1);

    // Where each ran: the analysis on the interactive queue; the batch and its children, which
    // inherit their parent's queue, on TEMPORAL_TASK_QUEUE.
    expect((await handle(interactiveId).describe()).taskQueue).toBe(interactiveTaskQueue(p.config));
    for (const id of [`batch:${batchAccount.userId}:${batchId}`, ...childIds]) expect((await handle(id).describe()).taskQueue, id).toBe(p.config.TEMPORAL_TASK_QUEUE);
  }, 180_000);

  it('a vehicle report asked for directly runs on the interactive queue too', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const requestId = `vehicle-${user.userId}`;
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: { ...bearer(user.liveKey), 'x-request-id': requestId },
      payload: {
        images: ['gps-DSCN0010.jpg', 'gps-DSCN0012.jpg', 'gps-DSCN0021.jpg'].map((f) => ({ base64: photoBase64(f) })),
        preset: 'vehicle-condition',
        context: { vehicle: { vin: 'WVWZZZ1JZXW000001', make: 'Volkswagen', model: 'Golf', year: 1999, mileage: 184000 } },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().outputSchema).toBe('vehicle');
    expect((await handle(`vehicle:${user.userId}:${requestId}`).describe()).taskQueue).toBe(interactiveTaskQueue(p.config));
  }, 60_000);
});
