import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { apiUrl, killAll, serviceEnv, spawnService } from '../helpers/processes.ts';

// A real API process (node --import tsx api/server.ts) receives SIGTERM while an analysis it
// started is waiting on its workflow. The worker and the simulated vendor run in this process.
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => {
  killAll();
  await p?.close();
});

const analyze = (base: string, key: string, body: unknown, requestId?: string) =>
  fetch(`${base}/v1/analyze`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(requestId ? { 'x-request-id': requestId } : {}) },
    body: JSON.stringify(body),
  });

async function ledgerKinds(accountId: string): Promise<string[]> {
  const r = await p.db.query('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [accountId]);
  return r.rows.map((row) => row.kind as string);
}

describe('API graceful shutdown (SIGTERM)', () => {
  it('stops accepting connections, lets a slow in-flight analysis finish (200), then exits 0', async () => {
    const api = spawnService('api/server.ts', serviceEnv(p.config, { SHUTDOWN_GRACE_MS: 20_000 }));
    const base = await apiUrl(api);
    const user = await createTestAccount(p.db, { community: 20 });
    p.sim.setBehaviour('all', { latencyMs: 2000 });
    try {
      const callsBefore = p.sim.stats().openai.calls;
      const pending = analyze(base, user.liveKey, { imageBase64: photoBase64('gps-DSCN0021.jpg'), modules: ['dating', 'location', 'describe'] });
      await expect.poll(() => p.sim.stats().openai.calls, { timeout: 30_000, interval: 20 }).toBe(callsBefore + 1);
      const sigtermAt = performance.now();
      api.child.kill('SIGTERM');

      // No new connections once draining: the listener is closed.
      await expect.poll(() => fetch(`${base}/v1/health`).then((r) => r.status, (e: Error) => (e.cause as { code?: string })?.code ?? e.message), { timeout: 5_000, interval: 20 }).toBe('ECONNREFUSED');

      const res = await pending;
      const answeredAt = performance.now();
      expect(res.status).toBe(200);
      expect(res.headers.get('connection')).toBe('close');
      const body = (await res.json()) as { usage: { creditsCharged: number } };
      expect(body.usage.creditsCharged).toBe(3);

      const exit = await api.exited;
      expect(exit).toMatchObject({ code: 0, signal: null });
      expect(exit.atMs).toBeGreaterThanOrEqual(answeredAt);
      expect(api.logLines().map((l) => l.msg)).toEqual(expect.arrayContaining(['signal received', 'shutting down: no new connections, finishing in-flight requests', 'shut down']));
      expect(await ledgerKinds(user.userId)).toEqual(['grant', 'reserve', 'settle']);
      expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 17, reserved: 0 });
      console.log(`[shutdown-api] SIGTERM → in-flight answer ${Math.round(answeredAt - sigtermAt)} ms (200), → exit ${Math.round(exit.atMs - sigtermAt)} ms (code 0)`);
    } finally {
      p.sim.setBehaviour('all', { latencyMs: 0 });
    }
  }, 90_000);

  it('past the grace time a request still awaiting its workflow gets a retryable 503 envelope; the same x-request-id then gets the result, billed once', async () => {
    const api = spawnService('api/server.ts', serviceEnv(p.config, { SHUTDOWN_GRACE_MS: 500 }));
    const base = await apiUrl(api);
    const user = await createTestAccount(p.db, { community: 20 });
    const requestId = `req-shutdown-${Date.now()}`;
    const body = { imageBase64: photoBase64('gps-DSCN0010.jpg'), modules: ['dating', 'describe'] };
    // The vendor holds the call until released: the 503 below must come from the grace time
    // running out while the workflow still waits, whatever the machine's speed.
    p.sim.hold();
    try {
      const callsBefore = p.sim.stats().openai.calls;
      const succeededBefore = p.sim.stats().openai.succeeded;
      const pending = analyze(base, user.liveKey, body, requestId);
      await expect.poll(() => p.sim.held(), { timeout: 30_000, interval: 20 }).toBe(1);
      const sigtermAt = performance.now();
      api.child.kill('SIGTERM');

      const res = await pending;
      const answeredAt = performance.now();
      // Answered by the grace time, not by the vendor call: that call is still held, unanswered.
      expect(p.sim.held()).toBe(1);
      expect(p.sim.stats().openai.succeeded).toBe(succeededBefore);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      const err = expectEnvelope(await res.json());
      expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, requestId });
      expect(err.message).toContain('same x-request-id');
      expect(await api.exited).toMatchObject({ code: 0, signal: null });
      p.sim.release();

      // The workflow went on without the API: the retry (another API instance) attaches to it.
      const retry = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { authorization: `Bearer ${user.liveKey}`, 'x-request-id': requestId }, payload: body });
      expect(retry.statusCode, retry.body).toBe(200);
      expect(retry.json().usage.creditsCharged).toBe(2);
      expect(p.sim.stats().openai.calls).toBe(callsBefore + 1);
      expect(await ledgerKinds(user.userId)).toEqual(['grant', 'reserve', 'settle']);
      expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
      console.log(`[shutdown-api] grace 500 ms: SIGTERM → 503 after ${Math.round(answeredAt - sigtermAt)} ms; retry with the same x-request-id → 200, 1 vendor call, billed once`);
    } finally {
      p.sim.release();
    }
  }, 90_000);
});
