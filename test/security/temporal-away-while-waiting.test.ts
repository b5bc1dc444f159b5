import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { RestartableTemporal } from '../../tools/chaos/infra.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Temporal SIGKILLed while a caller waits for its analysis (found by the chaos suite's outage):
 * before, the API's wait for the result retried until Temporal came back, so the caller hung for
 * the whole outage. Now the API probes Temporal while it waits and, once it has not answered for
 * 10 s, answers 503 SERVICE_UNAVAILABLE with Retry-After; the workflow goes on when Temporal is
 * back, and the same x-request-id then gets its result, billed once. Its own Temporal server.
 */
let dir: string;
let temporal: RestartableTemporal;
let p: Pipeline;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lenstack-temporal-away-'));
  temporal = await RestartableTemporal.start({ dir, namespace: 'default' });
  p = await startPipeline({ config: { TEMPORAL_ADDRESS: temporal.address, TEMPORAL_NAMESPACE: 'default' } });
}, 180_000);
afterAll(async () => {
  await p?.close();
  await temporal?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('Temporal goes away while a caller waits', () => {
  it('answers 503 with Retry-After instead of hanging; the same request id is served once Temporal is back', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    p.sim.setBehaviour('all', { latencyMs: 3_000 });
    const send = () =>
      p.app.inject({
        method: 'POST',
        url: '/v1/analyze',
        headers: { ...bearer(user.liveKey), 'x-request-id': 'temporal-away-1' },
        payload: { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating'] },
      });
    const first = send();
    await expect.poll(() => p.sim.stats().openai.calls, { timeout: 60_000, interval: 20 }).toBeGreaterThanOrEqual(1);
    await temporal.kill();

    const res = await first;
    expect(res.statusCode, res.body).toBe(503);
    const err = expectEnvelope(res.json());
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, requestId: 'temporal-away-1' });
    expect(res.headers['retry-after']).toBe('5');

    p.sim.setBehaviour('all', { latencyMs: 0 });
    await temporal.restart();
    // As a client does: resend with the same request id, after the Retry-After it was given, while
    // the answer is a retryable 503 (the API's channel reconnects with gRPC's backoff, which on a
    // loaded machine can outlast the first resend). Bounded: the sixth answer must be the result.
    let again = await send();
    for (let i = 0; i < 5 && again.statusCode === 503; i++) {
      expect(expectEnvelope(again.json())).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true });
      await new Promise((r) => setTimeout(r, Number(again.headers['retry-after']) * 1000));
      again = await send();
    }
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().usage.creditsCharged).toBe(1);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
  }, 240_000);
});
