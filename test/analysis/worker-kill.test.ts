import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { spawnWorkerProcess } from '../helpers/worker-process.ts';

let p: Pipeline;
const workers: ChildProcess[] = [];

const spawnWorker = () => spawnWorkerProcess(p.config, workers);

async function waitForPolling(w: { output: () => string }) {
  await expect.poll(() => w.output(), { timeout: 60_000, interval: 100 }).toContain('polling task queue');
}

beforeAll(async () => {
  p = await startPipeline({ worker: false });
}, 120_000);
afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  await p?.close();
});

describe('a worker killed mid vendor call', () => {
  it('the analysis still completes once, billed once, on another worker', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    p.sim.setBehaviour('all', { latencyMs: 3000 });
    const first = spawnWorker();
    await waitForPolling(first);

    const pending = p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageBase64: photoBase64('gps-DSCN0021.jpg'), modules: ['dating', 'location', 'describe'] },
    });
    // The vendor call is in flight on the first worker: kill it without any chance to clean up.
    await expect.poll(() => p.sim.stats().openai.calls, { timeout: 30_000, interval: 20 }).toBe(1);
    first.child.kill('SIGKILL');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 17, reserved: 3 });

    const second = spawnWorker();
    await waitForPolling(second);
    const res = await pending;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().usage.creditsCharged).toBe(3);
    // The call was retried after the heartbeat timeout, on the new worker.
    expect(p.sim.stats().openai.calls).toBe(2);

    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 17, reserved: 0 });
    const ledger = await p.db.query('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [user.userId]);
    expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'settle']);
    const events = await p.db.query('SELECT lens FROM lens_events WHERE user_id = $1 ORDER BY lens', [user.userId]);
    expect(events.rows.map((r) => r.lens)).toEqual(['dating', 'describe', 'location', 'moderation']);
    expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
    second.child.kill('SIGTERM');
  }, 120_000);
});
