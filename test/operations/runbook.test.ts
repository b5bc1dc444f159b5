import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';
import { sweepOnce } from '../../worker/sweeper.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { sample } from '../helpers/metrics.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

// The README runbook "A stuck analysis", step by step, against a vendor that never answers.
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline({ config: { VENDOR_ORDER: 'openai' } });
}, 120_000);
afterAll(async () => {
  await p?.close();
});

const BODY = { imageBase64: photoBase64('gps-DSCN0021.jpg'), modules: ['dating', 'describe'] };

async function stuckAnalysis(requestId: string) {
  const user = await createTestAccount(p.db, { community: 20 });
  const workflowId = `analyze:${user.userId}:${requestId}`;
  p.sim.setBehaviour('openai', { failRate: 1, failure: 'stall' });
  const send = () => p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(user.liveKey), 'x-request-id': requestId }, payload: BODY });
  const pending = send();
  const handle = p.temporal.workflow.getHandle(workflowId);
  // What the UI shows: a running workflow with one pending vendor activity that keeps heartbeating.
  await expect.poll(async () => (await handle.describe().catch(() => null))?.raw.pendingActivities?.[0]?.lastHeartbeatTime ?? null, { timeout: 20_000, interval: 100 }).not.toBeNull();
  const described = await handle.describe();
  const activity = described.raw.pendingActivities![0]!;
  return { user, workflowId, pending, handle, described, activity, send };
}

describe('runbook: a stuck analysis in the Temporal UI', () => {
  it('is found by its search attributes; its pending vendor activity heartbeats on attempt 1; cancelling releases its credits at once', async () => {
    const requestId = `req-runbook-cancel-${Date.now()}`;
    const s = await stuckAnalysis(requestId);
    expect(s.described.status.name).toBe('RUNNING');
    expect(s.activity.activityType?.name).toBe('callOpenAI');
    expect(s.activity.attempt).toBe(1);
    const found: string[] = [];
    for await (const w of p.temporal.workflow.list({ query: `LenstackRequestId = "${requestId}" AND LenstackUserId = "${s.user.userId}" AND ExecutionStatus = "Running"` })) found.push(w.workflowId);
    expect(found).toEqual([s.workflowId]);
    expect(await getBalance(p.db, s.user.userId)).toMatchObject({ community: 18, reserved: 2 });

    await s.handle.cancel(); // UI: "Request Cancellation"
    const res = await s.pending;
    p.sim.setBehaviour('openai', { failRate: 0 });
    // The cancellation stops the saga at its vendor call (no fallback to the next vendor): the
    // workflow ends CANCELLED and the waiting request is told so, and to resend with a new id.
    expect(res.statusCode).toBe(500);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'INTERNAL_ERROR', retryable: true, requestId });
    expect(res.json().error.message).toContain('was cancelled');
    expect((await s.handle.describe()).status.name).toBe('CANCELLED');
    // The saga's compensation ran: released, nothing charged.
    expect(await getBalance(p.db, s.user.userId)).toMatchObject({ community: 20, reserved: 0 });
    const ledger = await p.db.query('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [s.user.userId]);
    expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'release']);
  });

  it('terminating skips the compensation: the reservation stays open until it expires, then the sweeper releases it and the ledger checks', async () => {
    const s = await stuckAnalysis(`req-runbook-terminate-${Date.now()}`);
    await s.handle.terminate('runbook test'); // UI: "Terminate"
    const res = await s.pending;
    p.sim.setBehaviour('openai', { failRate: 0 });
    expect(res.statusCode).toBe(500);
    expect(expectEnvelope(res.json()).code).toBe('INTERNAL_ERROR');
    expect((await s.handle.describe()).status.name).toBe('TERMINATED');
    expect(await getBalance(p.db, s.user.userId)).toMatchObject({ community: 18, reserved: 2 });
    const reservationId = `res:${s.workflowId}`;
    // Time passes (RESERVATION_TTL_MS, 15 min by default): move the expiry instead of waiting.
    await p.db.query(`UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, [reservationId]);
    const metrics = createWorkerMetrics();
    const swept = await sweepOnce(p.db, metrics, () => {});
    expect(swept).toContain(reservationId);
    expect(sample(await metrics.registry.metrics(), 'lenstack_reservations_swept_total')).toBe(swept.length);
    expect(await getBalance(p.db, s.user.userId)).toMatchObject({ community: 20, reserved: 0 });
    const r = await p.db.query('SELECT status, reason FROM reservations WHERE id = $1', [reservationId]);
    expect(r.rows[0]).toEqual({ status: 'released', reason: 'expired' });
    expect((await checkInvariants(p.db, s.user.userId))[0]!.ok).toBe(true);
    // That request id is spent: the same x-request-id attaches to the terminated run again.
    const again = await s.send();
    expect(again.statusCode).toBe(500);
    expect(p.sim.stats().openai.succeeded).toBe(0);
  });

  it('reset to the first workflow task reruns it under the same id and reservation: the retry with the same x-request-id gets the result, billed once', async () => {
    const s = await stuckAnalysis(`req-runbook-reset-${Date.now()}`);
    p.sim.setBehaviour('openai', { failRate: 0 }); // the vendor is fixed
    const history = await s.handle.fetchHistory();
    const firstTask = history.events!.find((e) => e.workflowTaskCompletedEventAttributes)!;
    // UI: "Reset" to the first workflow task; CLI: temporal workflow reset --type FirstWorkflowTask.
    const { runId } = await p.temporal.workflowService.resetWorkflowExecution({
      namespace: p.config.TEMPORAL_NAMESPACE,
      workflowExecution: { workflowId: s.workflowId, runId: s.described.runId },
      reason: 'runbook test',
      workflowTaskFinishEventId: firstTask.eventId,
      requestId: `reset-${s.workflowId}`,
    });
    expect(runId).not.toBe(s.described.runId);
    await s.pending; // the first run was terminated by the reset
    const retry = await s.send();
    expect(retry.statusCode, retry.body).toBe(200);
    expect(retry.json().usage.creditsCharged).toBe(2);
    const ledger = await p.db.query('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [s.user.userId]);
    expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'settle']);
    expect(await getBalance(p.db, s.user.userId)).toMatchObject({ community: 18, reserved: 0 });
    expect((await checkInvariants(p.db, s.user.userId))[0]!.ok).toBe(true);
  });
});
