import { noUploadWaiters } from '../helpers/deps.ts';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createUploads } from '../../uploads/service.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';

/**
 * No storage without payment (docs/reliability.md): the free lookup does not keep an upload alive,
 * an upload has a hard maximum age from creation, and an account that never bought credits has a
 * small quota. Real HTTP, the real tus client, the real database.
 */
const MiB = 1024 * 1024;
let a: TestApp;
let base: string;
beforeAll(async () => {
  a = await buildTestApp({ config: { ACCOUNT_UPLOAD_QUOTA_BYTES: 16 * MiB, ACCOUNT_UPLOAD_QUOTA_UNPAID_BYTES: 1 * MiB } });
  await a.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;
}, 60_000);
afterAll(async () => a?.close());

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
function upload(key: string, bytes: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const up = new tus.Upload(bytes, { endpoint: `${base}/v1/uploads`, headers: bearer(key), retryDelays: null, onSuccess: () => resolve(up.url!.split('/').pop()!), onError: reject });
    up.start();
  });
}
const lookup = (key: string, id: string) => a.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(key), payload: { uploadIds: [id] } });
const rowOf = async (id: string) => (await a.db.query('SELECT last_used_at, expired_at FROM uploads WHERE id = $1', [id])).rows[0] as { last_used_at: Date; expired_at: Date | null };

describe('no storage without payment', () => {
  it('the free lookup does not restart an upload\'s expiry: a 0-credit account cannot keep it by looking it up daily', async () => {
    const user = await createTestAccount(a.db);
    const bytes = photoBytes('Canon_40D.jpg');
    const id = await upload(user.liveKey, bytes);
    // 20 h unused.
    await a.db.query(`UPDATE uploads SET last_used_at = now() - interval '20 hours' WHERE id = $1`, [id]);
    const before = (await rowOf(id)).last_used_at;
    const res = await lookup(user.liveKey, id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results[sha(bytes)]).toMatchObject({ matchType: 'none' });
    expect((await rowOf(id)).last_used_at).toEqual(before);
    // Five hours on, past the 24 h since its last billed use: the collector expires it. The five
    // hours pass for this upload alone (a sweep dated ahead would expire the uploads of every test
    // file running alongside on the same database).
    await a.db.query(`UPDATE uploads SET last_used_at = last_used_at - interval '5 hours', created_at = created_at - interval '5 hours' WHERE id = $1`, [id]);
    const uploads = createUploads({ db: a.db, blobs: new FsBlobStore(a.config.BLOB_DIR), config: a.config, onSettled: noUploadWaiters });
    await uploads.sweep();
    expect((await rowOf(id)).expired_at).not.toBeNull();
    const after = await lookup(user.liveKey, id);
    expect(after.statusCode).toBe(404);
    expect(expectEnvelope(after.json()).message).toMatch(/expired .*upload the photo again/);
  });

  it('an upload older than UPLOAD_MAX_AGE_MS is expired however recently it was used: on resolution and by the collector', async () => {
    const user = await createTestAccount(a.db, { purchased: 10 });
    const id = await upload(user.liveKey, photoBytes('Nikon_D70.jpg'));
    // Used a minute ago (as a billed request would), but made 8 days ago.
    await a.db.query(`UPDATE uploads SET created_at = now() - interval '8 days', last_used_at = now() - interval '1 minute' WHERE id = $1`, [id]);
    const res = await lookup(user.liveKey, id);
    expect(res.statusCode, res.body).toBe(404);
    const error = expectEnvelope(res.json());
    expect(error.code).toBe('NOT_FOUND');
    expect(error.message).toMatch(/expired .*upload the photo again/);
    const uploads = createUploads({ db: a.db, blobs: new FsBlobStore(a.config.BLOB_DIR), config: a.config, onSettled: noUploadWaiters });
    await uploads.sweep();
    expect((await rowOf(id)).expired_at).not.toBeNull();
  });

  it('an account that never bought credits has the small quota; one that bought credits has the full one', async () => {
    const create = (key: string, size: number) => fetch(`${base}/v1/uploads`, { method: 'POST', headers: { ...bearer(key), 'tus-resumable': '1.0.0', 'upload-length': String(size) } });
    const free = await createTestAccount(a.db, { community: 100 });
    const refused = await create(free.liveKey, 2 * MiB);
    expect(refused.status).toBe(413);
    const error = expectEnvelope(await refused.json());
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
    expect(error.message).toContain('bought credits');
    expect((await a.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [free.userId])).rows[0].n).toBe(0);
    const paid = await createTestAccount(a.db, { purchased: 1 });
    expect((await create(paid.liveKey, 2 * MiB)).status).toBe(201);
  });
});
