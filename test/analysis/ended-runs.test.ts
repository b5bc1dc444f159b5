import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance, sweepExpired } from '../../credits/ledger.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A run ended from outside (an operator terminates it in the Temporal UI) never answers under its
 * request id: every resend with the same x-request-id attaches to the ended run. The caller is told
 * so, and what happens to the credits, instead of a bare "Internal server error" forever.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => {
  p?.sim.reset();
  await p?.close();
});

/** Poll (bounded) until the run is waiting on its vendor call. */
async function untilVendorCallPending(workflowId: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const d = await p.temporal.workflow.getHandle(workflowId).describe().catch(() => null);
    if (d && (d.raw.pendingActivities?.length ?? 0) > 0) return;
    if (Date.now() > deadline) throw new Error(`${workflowId} never reached its vendor call`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('an analysis whose workflow an operator terminated', () => {
  it('answers 500 saying to resend with a new request id; the resend with the same id says the same; the sweeper releases the credits', async () => {
    p.sim.setBehaviour('all', { latencyMs: 120_000 });
    const user = await createTestAccount(p.db, { community: 10 });
    const requestId = 'req-terminated-1';
    const workflowId = `analyze:${user.userId}:${requestId}`;
    const body = { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating', 'describe'] };
    const send = () => p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(user.liveKey), 'x-request-id': requestId }, payload: body });

    const pending = send();
    await untilVendorCallPending(workflowId);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 8, reserved: 2 });
    await p.temporal.workflow.getHandle(workflowId).terminate('operator: stuck vendor');

    const res = await pending;
    expect(res.statusCode).toBe(500);
    const err = res.json().error;
    expect(err).toMatchObject({ code: 'INTERNAL_ERROR', retryable: true, requestId });
    expect(err.message).toContain('stopped by an operator');
    expect(err.message).toContain('new x-request-id');

    p.sim.reset();
    const again = await send();
    expect(again.statusCode).toBe(500);
    expect(again.json().error.message).toBe(err.message);

    // Termination skips the saga's compensation: the reservation waits for its expiry.
    await p.db.query(`UPDATE reservations SET expires_at = now() - interval '1 second' WHERE workflow_id = $1`, [workflowId]);
    await sweepExpired(p.db);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });

    // A new request id analyzes the photo normally.
    const fresh = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(user.liveKey), 'x-request-id': 'req-terminated-2' }, payload: body });
    expect(fresh.statusCode, fresh.body).toBe(200);
    expect(fresh.json().usage.creditsCharged).toBe(2);
  }, 60_000);

  it('a cancelled run releases its credits at once and says it was cancelled, not that every provider failed', async () => {
    p.sim.setBehaviour('all', { latencyMs: 120_000 });
    const user = await createTestAccount(p.db, { community: 10 });
    const requestId = 'req-cancelled-1';
    const workflowId = `analyze:${user.userId}:${requestId}`;
    const pending = p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: { ...bearer(user.liveKey), 'x-request-id': requestId },
      payload: { imageBase64: photoBase64('Nikon_D70.jpg'), modules: ['dating', 'describe', 'location'] },
    });
    await untilVendorCallPending(workflowId);
    await p.temporal.workflow.getHandle(workflowId).cancel();

    const res = await pending;
    p.sim.reset();
    expect(res.statusCode).toBe(500);
    expect(res.json().error.code).toBe('INTERNAL_ERROR');
    expect(res.json().error.message).toContain('was cancelled');
    // The saga's compensation ran (cancellation is not termination): nothing held, nothing charged.
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    const described = await p.temporal.workflow.getHandle(workflowId).describe();
    expect(described.status.name).toBe('CANCELLED');
    // One vendor was tried, not all three in turn.
    const history = await p.temporal.workflow.getHandle(workflowId).fetchHistory();
    const scheduled = history.events!.filter((e) => e.activityTaskScheduledEventAttributes).map((e) => e.activityTaskScheduledEventAttributes!.activityType!.name);
    expect(scheduled).toEqual(['callOpenAI']);
  }, 60_000);
});
