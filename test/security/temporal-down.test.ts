import { createServer, type Server } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestUser, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Temporal unreachable at request time: before, the start failed deep in the client and the
 * caller got a bare 500 INTERNAL_ERROR (not retryable). Now: 503 SERVICE_UNAVAILABLE, retryable,
 * with Retry-After; nothing reserved, nothing in the registry; the same request with the same
 * x-request-id goes through once Temporal is back.
 */
let p: Pipeline;
let dead: Server;
let deadConnection: Connection;

beforeAll(async () => {
  // A port that accepts TCP and closes every connection at once: gRPC sees the frontend as UNAVAILABLE.
  dead = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
  const port = (dead.address() as { port: number }).port;
  deadConnection = Connection.lazy({ address: `127.0.0.1:${port}` });
  p = await startPipeline({ deps: { temporal: new Client({ connection: deadConnection }) } });
}, 120_000);
afterAll(async () => {
  await p?.close();
  await deadConnection?.close().catch(() => {});
  await new Promise((resolve) => dead?.close(resolve));
});

describe('Temporal unreachable at request time', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After and moves nothing', async () => {
    const user = await createTestUser(p.db, { community: 5 });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: { ...bearer(user.liveKey), 'x-request-id': 'temporal-down-1' },
      payload: { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating'] },
    });
    expect(res.statusCode, res.body).toBe(503);
    const err = expectEnvelope(res.json());
    expect(err.code).toBe('SERVICE_UNAVAILABLE');
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(/unreachable/);
    expect(res.headers['retry-after']).toBe('5');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
    const photos = await p.db.query('SELECT 1 FROM photos WHERE user_id = $1', [user.userId]);
    expect(photos.rowCount).toBe(0);
  }, 60_000);
});
