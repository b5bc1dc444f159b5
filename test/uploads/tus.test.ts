import { noUploadWaiters } from '../helpers/deps.ts';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../images/blobstore.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp, sendCut } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { createUploads } from '../../uploads/service.ts';

/**
 * The API's resumable uploads, driven by the official tus-js-client over real HTTP against two API
 * processes (two apps sharing the database and the blob store, as two replicas do).
 */
let a: TestApp;
let b: TestApp;
let urlA: string;
let urlB: string;
const QUOTA = 4 * 1024 * 1024;
beforeAll(async () => {
  a = await buildTestApp({ config: { ACCOUNT_UPLOAD_QUOTA_BYTES: QUOTA } });
  b = await buildTestApp({ config: { ACCOUNT_UPLOAD_QUOTA_BYTES: QUOTA } });
  const listen = async (t: TestApp) => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  };
  urlA = await listen(a);
  urlB = await listen(b);
}, 60_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
});

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** One whole upload by tus-js-client; resolves with its URL. */
function upload(base: string, key: string, bytes: Buffer, opts: Partial<tus.UploadOptions> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const up = new tus.Upload(bytes, {
      endpoint: `${base}/v1/uploads`,
      headers: bearer(key),
      retryDelays: null,
      metadata: { filename: 'car.jpg', filetype: 'image/jpeg' },
      ...opts,
      onSuccess: () => resolve(up.url!),
      onError: reject,
    });
    up.start();
  });
}

const head = (base: string, key: string, url: string) =>
  fetch(new URL(url, base), { method: 'HEAD', headers: { ...bearer(key), 'tus-resumable': '1.0.0' } });

describe('tus uploads on the API', () => {
  it('takes a photo from tus-js-client, hashes and probes it once and keeps its bytes once in the blob store', async () => {
    const user = await createTestAccount(a.db);
    const bytes = photoBytes('Canon_40D.jpg');
    const url = await upload(urlA, user.liveKey, bytes, { chunkSize: 2000 });
    const id = url.split('/').pop()!;
    expect(id).toMatch(/^upl_[0-9a-f]{32}$/);
    const row = (await a.db.query('SELECT user_id, size::int, sha256, format, width, height, finished_at FROM uploads WHERE id = $1', [id])).rows[0];
    expect(row).toMatchObject({ user_id: user.userId, size: bytes.length, sha256: sha(bytes), format: 'jpeg', width: 100, height: 68 });
    expect(row.finished_at).not.toBeNull();
    const blobs = new FsBlobStore(a.config.BLOB_DIR);
    expect((await blobs.get(sha(bytes))).equals(bytes)).toBe(true);
    // HEAD of a finished upload, on either process: all of it is there.
    for (const base of [urlA, urlB]) {
      const res = await head(base, user.liveKey, url);
      expect(res.status).toBe(200);
      expect(res.headers.get('upload-offset')).toBe(String(bytes.length));
      expect(res.headers.get('tus-resumable')).toBe('1.0.0');
    }
    // The same bytes again: a second upload id, one blob.
    const again = await upload(urlB, user.liveKey, bytes);
    expect(again).not.toBe(url);
    const hashes = (await a.db.query('SELECT sha256 FROM uploads WHERE user_id = $1', [user.userId])).rows.map((r) => r.sha256);
    expect(hashes).toEqual([sha(bytes), sha(bytes)]);
    let copies = 0;
    for await (const blob of blobs.list()) if (blob.sha256 === sha(bytes)) copies++;
    expect(copies).toBe(1);
  });

  it('continues on a second API process an upload whose PATCH was cut in the middle on the first', async () => {
    const user = await createTestAccount(a.db);
    const bytes = photoBytes('mobile-jolla.jpg');
    const created = await fetch(`${urlA}/v1/uploads`, {
      method: 'POST',
      headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(bytes.length) },
    });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    // A PATCH that announces every byte but sends a third of them, then the connection drops.
    const cutAt = Math.floor(bytes.length / 3);
    await sendCut(new URL(location, urlA).toString(), { method: 'PATCH', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-offset': '0' }, bytes, cutAt });
    // The bytes that arrived are kept: the second process sees them. The client closed its side
    // after the kernel took every byte it wrote, so the first process stores all of them; polling
    // for exactly that many (not "more than none") waits until it has finished writing them.
    let offset = 0;
    await expect
      .poll(async () => {
        offset = Number((await head(urlB, user.liveKey, location)).headers.get('upload-offset'));
        return offset;
      }, { timeout: 10_000 })
      .toBe(cutAt);
    // tus-js-client resumes it from that offset on process B.
    const patchedFrom: string[] = [];
    const url = await upload(urlB, user.liveKey, bytes, {
      uploadUrl: new URL(location, urlB).toString(),
      onBeforeRequest: (req) => {
        if (req.getMethod() === 'PATCH') patchedFrom.push(String(req.getHeader('Upload-Offset')));
      },
    });
    // It sent only what was missing: one PATCH from the offset the first process kept.
    expect(patchedFrom).toEqual([String(offset)]);
    expect(new URL(url).pathname).toBe(new URL(location, urlA).pathname);
    const row = (await b.db.query('SELECT size::int, sha256 FROM uploads WHERE id = $1', [location.split('/').pop()])).rows[0];
    expect(row).toEqual({ size: bytes.length, sha256: sha(bytes) });
    expect((await new FsBlobStore(b.config.BLOB_DIR).get(sha(bytes))).equals(bytes)).toBe(true);
  });

  it('creation-with-upload under an id the client chose: a POST cut mid-body keeps what arrived, and HEAD then PATCH on the other process finish it', async () => {
    const user = await createTestAccount(a.db);
    const bytes = photoBytes('mobile-jolla.jpg');
    const id = `upl_${randomBytes(16).toString('hex')}`;
    const metadata = `filename ${Buffer.from('car.jpg').toString('base64')},uploadId ${Buffer.from(id).toString('base64')}`;
    // The POST announces every byte and carries a third of them, then the connection drops: no answer, no Location.
    const cutAt = Math.floor(bytes.length / 3);
    await sendCut(`${urlA}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(bytes.length), 'upload-metadata': metadata }, bytes, cutAt });
    // The client knows the URL without the answer: the id it chose. What arrived is kept (the row too).
    const location = `/v1/uploads/${id}`;
    let offset = 0;
    await expect
      .poll(async () => {
        offset = Number((await head(urlB, user.liveKey, location)).headers.get('upload-offset'));
        return offset;
      }, { timeout: 10_000 })
      .toBe(cutAt);
    const patchedFrom: string[] = [];
    const url = await upload(urlB, user.liveKey, bytes, {
      uploadUrl: new URL(location, urlB).toString(),
      onBeforeRequest: (req) => {
        if (req.getMethod() === 'PATCH') patchedFrom.push(String(req.getHeader('Upload-Offset')));
      },
    });
    expect(patchedFrom).toEqual([String(cutAt)]);
    expect(new URL(url).pathname).toBe(location);
    expect((await b.db.query('SELECT user_id, size::int, sha256 FROM uploads WHERE id = $1', [id])).rows[0]).toEqual({ user_id: user.userId, size: bytes.length, sha256: sha(bytes) });

    // One request for a whole photo: the POST carries it and answers it finished, under the chosen id.
    const whole = `upl_${randomBytes(16).toString('hex')}`;
    const methods: string[] = [];
    const one = await upload(urlA, user.liveKey, photoBytes('Canon_40D.jpg'), {
      uploadDataDuringCreation: true,
      metadata: { filename: 'car.jpg', uploadId: whole },
      onBeforeRequest: (req) => void methods.push(req.getMethod()),
    });
    expect(methods).toEqual(['POST']);
    expect(new URL(one).pathname).toBe(`/v1/uploads/${whole}`);
    expect((await a.db.query('SELECT sha256 FROM uploads WHERE id = $1', [whole])).rows[0].sha256).toBe(sha(photoBytes('Canon_40D.jpg')));
    // Its datastore copy goes once the POST was answered (the bytes are in the blob store).
    expect((await new FsBlobStore(a.config.BLOB_DIR).get(sha(photoBytes('Canon_40D.jpg')))).equals(photoBytes('Canon_40D.jpg'))).toBe(true);
    await expect.poll(() => existsSync(join(`${a.config.BLOB_DIR}-uploads`, whole))).toBe(false);

    // An id another account holds is refused (400), and that upload is untouched.
    const other = await createTestAccount(a.db);
    const taken = await upload(urlA, other.liveKey, photoBytes('Canon_40D.jpg'), { uploadDataDuringCreation: true, metadata: { filename: 'x.jpg', uploadId: whole } }).catch((e: tus.DetailedError) => e);
    expect((taken as tus.DetailedError).originalResponse?.getStatus()).toBe(400);
    expect((taken as tus.DetailedError).originalResponse?.getBody()).toContain('is taken');
    expect((await a.db.query('SELECT user_id FROM uploads WHERE id = $1', [whole])).rows[0].user_id).toBe(user.userId);
  });

  it('answers 404 to another account for an upload, finished or not, and keeps it for its owner', async () => {
    const owner = await createTestAccount(a.db);
    const other = await createTestAccount(a.db);
    const bytes = photoBytes('Nikon_D70.jpg');
    const url = await upload(urlA, owner.liveKey, bytes);
    const res = await head(urlA, other.liveKey, url);
    expect(res.status).toBe(404);
    const del = await fetch(new URL(url, urlA), { method: 'DELETE', headers: { ...bearer(other.liveKey), 'tus-resumable': '1.0.0' } });
    expect(del.status).toBe(404);
    expect(expectEnvelope(await del.json()).code).toBe('NOT_FOUND');
    const unfinished = await fetch(`${urlA}/v1/uploads`, { method: 'POST', headers: { ...bearer(owner.liveKey), 'tus-resumable': '1.0.0', 'upload-length': '5000' } });
    const patch = await fetch(new URL(unfinished.headers.get('location')!, urlA), {
      method: 'PATCH',
      headers: { ...bearer(other.liveKey), 'tus-resumable': '1.0.0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' },
      body: Buffer.alloc(5000),
    });
    expect(patch.status).toBe(404);
    expect((await head(urlA, owner.liveKey, unfinished.headers.get('location')!)).headers.get('upload-offset')).toBe('0');
    expect((await head(urlA, owner.liveKey, url)).status).toBe(200);
  });

  it('refuses an upload past the account quota with 413 saying what to do; deleting one frees its room', async () => {
    const user = await createTestAccount(a.db);
    const big = 3 * 1024 * 1024;
    const first = await fetch(`${urlA}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(big) } });
    expect(first.status).toBe(201);
    const second = await fetch(`${urlB}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(big) } });
    expect(second.status).toBe(413);
    const error = expectEnvelope(await second.json());
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
    expect(error.message).toMatch(/upload quota .*DELETE \/v1\/uploads\/\{id\}/);
    expect((await a.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(1);
    const del = await fetch(new URL(first.headers.get('location')!, urlA), { method: 'DELETE', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0' } });
    expect(del.status).toBe(204);
    const third = await fetch(`${urlB}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(big) } });
    expect(third.status).toBe(201);
  });

  it('refuses and deletes a finished upload that is not an image', async () => {
    const user = await createTestAccount(a.db);
    const err = await upload(urlA, user.liveKey, Buffer.from('not a photo at all, just text')).catch((e: tus.DetailedError) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as tus.DetailedError).originalResponse?.getStatus()).toBe(422);
    expect((await a.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
  });

  it('expires an upload unused past its lifetime: its id answers 404 saying it expired, and its room is free', async () => {
    const user = await createTestAccount(a.db);
    const url = await upload(urlA, user.liveKey, photoBytes('Pentax_K10D.jpg'));
    const uploads = createUploads({ db: a.db, blobs: new FsBlobStore(a.config.BLOB_DIR), config: a.config, onSettled: noUploadWaiters });
    // This upload made older, not the clock moved: a sweep at a future time would expire every
    // other test's uploads in the shared database too.
    const id = url.split('/').pop()!;
    const unusedFor = (ms: number) => a.db.query('UPDATE uploads SET last_used_at = now() - make_interval(secs => $2) WHERE id = $1', [id, ms / 1000]);
    const expiredAt = async () => (await a.db.query<{ expired_at: Date | null }>('SELECT expired_at FROM uploads WHERE id = $1', [id])).rows[0]!.expired_at;
    await unusedFor(a.config.UPLOAD_TTL_MS - 60_000);
    await uploads.sweep();
    expect(await expiredAt()).toBeNull();
    await unusedFor(a.config.UPLOAD_TTL_MS + 60_000);
    expect(await uploads.sweep()).toBeGreaterThanOrEqual(1);
    expect(await expiredAt()).toBeInstanceOf(Date);
    const res = await fetch(new URL(url, urlA), { method: 'PATCH', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, body: 'x' });
    expect(res.status).toBe(404);
    expect(expectEnvelope(await res.json()).message).toMatch(/expired .*upload the photo again/);
    // No longer counted: the account may upload its full quota again.
    const full = await fetch(`${urlA}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(QUOTA) } });
    expect(full.status).toBe(201);
  });

  it('counts a multipart analyze body against the bytes-in-flight budget: past it, 503 before a byte is read and no upload made', async () => {
    const MiB = 1024 * 1024;
    const c = await buildTestApp({ config: { BODY_BYTES_IN_FLIGHT: 2.5 * MiB, MAX_BODY_BYTES: 2.5 * MiB } });
    try {
      await c.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = c.app.server.address() as AddressInfo;
      const holder = await createTestAccount(c.db);
      const other = await createTestAccount(c.db);
      const boundary = 'lenstack-boundary';
      const head = Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="photo"; filename="big.jpg"\r\ncontent-type: image/jpeg\r\n\r\n`);
      const length = 1.5 * MiB;
      const multipart = (key: string) => ({ ...bearer(key), 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(length) });
      // The first body is admitted and stays open, half sent: it holds 1.5 MiB of the budget.
      const first = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/v1/analyze', headers: multipart(holder.liveKey) });
      first.on('error', () => undefined);
      first.write(Buffer.concat([head, photoBytes('mobile-jolla.jpg').subarray(0, 200_000)]));
      await expect.poll(async () => (await c.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [holder.userId])).rows[0].n, { timeout: 10_000 }).toBe(1);
      const refused = await fetch(`http://127.0.0.1:${port}/v1/analyze`, { method: 'POST', headers: multipart(other.liveKey), body: Buffer.concat([head, Buffer.alloc(length - head.length)]) });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('2');
      expect(expectEnvelope(await refused.json()).code).toBe('SERVICE_UNAVAILABLE');
      expect((await c.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [other.userId])).rows[0].n).toBe(0);
      // The held body goes away: its share of the budget comes back.
      first.destroy();
      await expect
        .poll(async () => (await fetch(`http://127.0.0.1:${port}/v1/analyze`, { method: 'POST', headers: multipart(other.liveKey), body: Buffer.concat([head, Buffer.alloc(length - head.length)]) })).status, { timeout: 10_000 })
        .not.toBe(503);
    } finally {
      await c.close();
    }
  });
});
