import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { killAll, serviceEnv, spawnService, workerPolling, type ServiceProcess } from '../helpers/processes.ts';

// Real worker processes (node --import tsx worker/main.ts), two polling at once; the one running
// the vendor call gets SIGTERM. The API (app.inject) and the simulated vendor run in this process.
// Long enough beside the 800 ms call that a loaded machine (CI at load 15 ran it past 2 s) still finishes it inside the grace time.
const GRACE_MS = 4000;
let p: Pipeline;
const workers: ServiceProcess[] = [];

function spawnWorker(): ServiceProcess {
  const w = spawnService('worker/main.ts', serviceEnv(p.config, { SHUTDOWN_GRACE_MS: GRACE_MS }));
  workers.push(w);
  return w;
}

/** The live worker whose log shows the vendor call of `workflowId` started. */
function runningTheCall(workflowId: string): ServiceProcess | undefined {
  return workers.find((w) => w.child.exitCode === null && w.logLines().some((l) => l.workflowId === workflowId && l.msg === 'vendor call started'));
}

beforeAll(async () => {
  p = await startPipeline({ worker: false });
  await Promise.all([spawnWorker(), spawnWorker()].map(workerPolling));
}, 120_000);
afterAll(async () => {
  killAll();
  await p?.close();
});

async function analyzeWhileStopping(latencyMs: number, photo: string) {
  const user = await createTestAccount(p.db, { community: 20 });
  const requestId = `req-worker-stop-${latencyMs}-${Date.now()}`;
  const workflowId = `analyze:${user.userId}:${requestId}`;
  p.sim.setBehaviour('all', { latencyMs });
  const callsBefore = p.sim.stats().openai.calls;
  const pending = p.app.inject({
    method: 'POST',
    url: '/v1/analyze',
    headers: { ...bearer(user.liveKey), 'x-request-id': requestId },
    payload: { imageBase64: photoBase64(photo), modules: ['dating', 'location', 'describe'] },
  });
  await expect.poll(() => runningTheCall(workflowId), { timeout: 30_000, interval: 20 }).toBeDefined();
  const stopping = runningTheCall(workflowId)!;
  const other = workers.find((w) => w !== stopping && w.child.exitCode === null)!;
  expect(other).toBeDefined();
  const sigtermAt = performance.now();
  stopping.child.kill('SIGTERM');
  const res = await pending;
  const answeredAt = performance.now();
  const exit = await stopping.exited;
  p.sim.setBehaviour('all', { latencyMs: 0 });
  return { user, workflowId, res, stopping, other, exit, calls: p.sim.stats().openai.calls - callsBefore, answeredMs: answeredAt - sigtermAt, exitMs: exit.atMs - sigtermAt };
}

async function expectBilledOnce(accountId: string) {
  const ledger = await p.db.query('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [accountId]);
  expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'settle']);
  expect(await getBalance(p.db, accountId)).toMatchObject({ community: 17, reserved: 0 });
  const events = await p.db.query('SELECT lens FROM lens_events WHERE user_id = $1 ORDER BY lens', [accountId]);
  expect(events.rows.map((r) => r.lens)).toEqual(['dating', 'describe', 'location', 'moderation']);
  expect((await checkInvariants(p.db, accountId))[0]!.ok).toBe(true);
}

describe('worker graceful shutdown (SIGTERM) while a second worker runs', () => {
  it('a vendor call shorter than the grace time finishes on the stopping worker; the analysis completes once, billed once', async () => {
    const r = await analyzeWhileStopping(800, 'gps-DSCN0021.jpg');
    expect(r.res.statusCode, r.res.body).toBe(200);
    expect(r.res.json().usage.creditsCharged).toBe(3);
    expect(r.calls).toBe(1); // not retried: the call finished during the drain
    expect(r.exit).toMatchObject({ code: 0, signal: null });
    const stopped = r.stopping.logLines().filter((l) => l.workflowId === r.workflowId).map((l) => l.msg);
    expect(stopped).toContain('vendor call succeeded');
    expect(r.stopping.logLines().map((l) => l.msg)).toEqual(expect.arrayContaining(['signal received: no new tasks, draining in-flight activities', 'worker shut down']));
    await expectBilledOnce(r.user.userId);
    console.log(`[shutdown-worker] call 800 ms, grace ${GRACE_MS} ms: answered ${Math.round(r.answeredMs)} ms after SIGTERM, worker exited after ${Math.round(r.exitMs)} ms (code 0), 1 vendor call`);
    // Two workers again for the next case.
    await workerPolling(spawnWorker());
  }, 90_000);

  it('a vendor call longer than the grace time is cancelled at the deadline and retried on the other worker; completes once, billed once', async () => {
    const r = await analyzeWhileStopping(GRACE_MS + 2000, 'gps-DSCN0010.jpg');
    expect(r.res.statusCode, r.res.body).toBe(200);
    expect(r.res.json().usage.creditsCharged).toBe(3);
    expect(r.calls).toBe(2); // the cancelled attempt and its retry
    // It exited by its own drain: code 0, no signal left to kill it, its drain logged to the end.
    expect(r.exit).toMatchObject({ code: 0, signal: null });
    expect(r.stopping.logLines().map((l) => l.msg)).toEqual(expect.arrayContaining(['signal received: no new tasks, draining in-flight activities', 'worker shut down']));
    const failed = r.stopping.logLines().find((l) => l.workflowId === r.workflowId && l.msg === 'vendor call failed');
    expect(failed).toMatchObject({ kind: 'aborted', attempt: 1 });
    await expect
      .poll(() => r.other.logLines().find((l) => l.workflowId === r.workflowId && l.msg === 'vendor call succeeded'), { timeout: 5_000 })
      .toMatchObject({ attempt: 2, activityType: 'callOpenAI' });
    // The cancelled attempt is reported failed by the stopping worker, so the retry follows the
    // 0.5 s backoff rather than the 5 s heartbeat timeout a killed worker would cost. Temporal's
    // own record says which: the retry's started event carries the attempt before's failure,
    // the worker's report, not a timeout (no clock in this test).
    const history = await p.temporal.workflow.getHandle(r.workflowId).fetchHistory();
    const events = history.events ?? [];
    const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'callOpenAI').map((e) => String(e.eventId));
    const started = events.find((e) => scheduled.includes(String(e.activityTaskStartedEventAttributes?.scheduledEventId)) && e.activityTaskStartedEventAttributes?.attempt === 2);
    const before = started?.activityTaskStartedEventAttributes?.lastFailure;
    expect(before, JSON.stringify(events.map((e) => e.activityTaskStartedEventAttributes ?? null).filter(Boolean))).toBeDefined();
    expect(before!.timeoutFailureInfo).toBeFalsy();
    expect(before!.message).toMatch(/abort|cancel/i);
    const retried = r.other.logLines().find((l) => l.workflowId === r.workflowId && l.msg === 'vendor call started')!;
    const retryDelayMs = Date.parse(String(retried.time)) - Date.parse(String(failed!.time));
    await expectBilledOnce(r.user.userId);
    console.log(`[shutdown-worker] call ${GRACE_MS + 2000} ms, grace ${GRACE_MS} ms: cancelled at the deadline, worker exited after ${Math.round(r.exitMs)} ms (code 0); retried on the other worker ${retryDelayMs} ms after the cancellation, answered ${Math.round(r.answeredMs)} ms after SIGTERM, 2 vendor calls, billed once`);
  }, 90_000);
});
