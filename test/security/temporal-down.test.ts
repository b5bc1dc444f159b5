import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import sharp from 'sharp';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { bearer, createTestUser, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Temporal unreachable at request time: before, the start failed deep in the client and the
 * caller got a bare 500 INTERNAL_ERROR (not retryable). Now: 503 SERVICE_UNAVAILABLE, retryable,
 * with Retry-After; nothing reserved, nothing in the registry, no image left in the blob store;
 * the same request with the same x-request-id goes through once Temporal is back.
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

  it('leaves no image behind: the blob the request stored is deleted, since no workflow will read it', async () => {
    const user = await createTestUser(p.db, { community: 5 });
    // Bytes nobody stored before (a colour of this run's own), so the store cannot already hold them.
    const seed = process.pid % 200;
    const image = await sharp({ create: { width: 320, height: 240, channels: 3, background: { r: seed, g: 255 - seed, b: 77 } } }).jpeg().toBuffer();
    const sha256 = createHash('sha256').update(image).digest('hex');
    const blobs = new FsBlobStore(p.config.BLOB_DIR);
    await blobs.delete(sha256);
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageBase64: image.toString('base64'), modules: ['dating'] },
    });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(await blobs.has(sha256)).toBe(false);
  }, 60_000);
});
