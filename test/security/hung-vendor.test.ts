import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { vendorAttemptTimeoutMs } from '../../workflows/deadlines.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A hung vendor. Before: 3 vendors × 3 attempts × 120 s exceeded the workflow timeout, and the
 * vendor activity heartbeated from a timer, so a call that never answered looked alive; the caller
 * waited for the workflow timeout and got a 500, and the credits stayed held until the reservation
 * expired. Now each attempt has a deadline sized so the whole fallback chain ends inside the
 * workflow timeout: the caller gets 502 PROVIDER_UNAVAILABLE and the saga releases the credits.
 */
const WORKFLOW_TIMEOUT_MS = 24_000;
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline({ config: { WORKFLOW_TIMEOUT_MS, RESERVATION_TTL_MS: 600_000 } });
}, 120_000);
afterAll(async () => {
  await p?.close();
});

describe('vendor attempt deadlines', () => {
  it('fit the whole fallback chain (two chains, every vendor, every attempt) inside the workflow timeout', () => {
    for (const workflowTimeoutMs of [60_000, 600_000, 3_600_000]) {
      for (const vendors of [1, 2, 3]) {
        const attempt = vendorAttemptTimeoutMs({ workflowTimeoutMs, vendors });
        expect(2 * vendors * 3 * attempt).toBeLessThanOrEqual(workflowTimeoutMs / 2);
        expect(attempt).toBeLessThanOrEqual(120_000);
      }
    }
    expect(vendorAttemptTimeoutMs({ workflowTimeoutMs: 600_000, vendors: 3 })).toBe(16_666);
  });

  it('every vendor hanging: 502 PROVIDER_UNAVAILABLE well inside the workflow timeout, credits back at once', async () => {
    const user = await createTestAccount(p.db, { community: 5 });
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'stall' });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating', 'describe'] },
    });
    p.sim.reset();
    expect(res.statusCode, res.body).toBe(502);
    const err = expectEnvelope(res.json());
    expect(err.code).toBe('PROVIDER_UNAVAILABLE');
    expect(err.retryable).toBe(true);
    // A run that hit the workflow timeout would be a 500 with the credits still held.
    // Released by the saga's compensation, not by the sweeper (the reservation would live 10 minutes).
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
    const res2 = await p.db.query<{ status: string }>("SELECT status FROM reservations WHERE user_id = $1", [user.userId]);
    expect(res2.rows).toEqual([{ status: 'released' }]);
  }, 60_000);
});
