import { noUploadWaiters } from '../helpers/deps.ts';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { createUploads } from '../../uploads/service.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Upload ids wherever a photo goes, through HTTP against the real pipeline (Temporal, the worker,
 * the simulated vendors): analyze, lookup, enrich, photo and vehicle batches; and POST /v1/analyze
 * as multipart/form-data from the real curl.
 */
let p: Pipeline;
let base: string;
beforeAll(async () => {
  // A small JSON cap, so a body over it is cheap to send.
  p = await startPipeline({ config: { MAX_BODY_BYTES: 4 * 1024 * 1024 } });
  await p.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(p.app.server.address() as AddressInfo).port}`;
}, 120_000);
afterAll(async () => p?.close());

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const post = (key: string, url: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  p.app.inject({ method: 'POST', url, headers: { ...bearer(key), ...headers }, payload: body });

function upload(key: string, bytes: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const up = new tus.Upload(bytes, { endpoint: `${base}/v1/uploads`, headers: bearer(key), retryDelays: null, onSuccess: () => resolve(up.url!.split('/').pop()!), onError: reject });
    up.start();
  });
}
const lastUsed = async (id: string) => (await p.db.query('SELECT last_used_at FROM uploads WHERE id = $1', [id])).rows[0]?.last_used_at as Date | undefined;

describe('upload ids', () => {
  it('analyze takes images: [{ uploadId }], bills as for the same bytes sent as base64, and lookup and enrich take the same upload', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const bytes = photoBytes('Canon_40D.jpg');
    const id = await upload(user.liveKey, bytes);
    const res = await post(user.liveKey, '/v1/analyze', { images: [{ uploadId: id }], modules: ['dating'], options: { includeFingerprint: true } });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    expect(a.output.images[0]).toMatchObject({ index: 0, sha256: sha(bytes), cacheHit: false });
    expect(a.usage.creditsCharged).toBeGreaterThan(0);
    const charged = a.usage.creditsCharged as number;
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - charged, reserved: 0 });
    // The same photo as base64: the registry already holds it, a cache hit at 0 credits.
    const again = await post(user.liveKey, '/v1/analyze', { imageBase64: bytes.toString('base64'), modules: ['dating'] });
    expect(again.json().meta.cacheHit).toBe(true);

    const lookup = await post(user.liveKey, '/v2/lookup', { uploadIds: [id] });
    expect(lookup.statusCode, lookup.body).toBe(200);
    expect(lookup.json().results[sha(bytes)]).toMatchObject({ matchType: 'exact', hammingDistance: 0 });

    const enrich = await post(user.liveKey, '/v2/enrich', { uploadId: id, formats: ['xmp'] });
    expect(enrich.statusCode, enrich.body).toBe(200);
    expect(enrich.json()).toMatchObject({ sha256: sha(bytes), formatsWritten: ['xmp'] });
    expect(Buffer.from(enrich.json().imageBase64, 'base64').toString('latin1')).toContain('estimatedDate');
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
  });

  it('another account\'s upload id is 404 on analyze, lookup, enrich and batches, and nothing moves', async () => {
    const owner = await createTestAccount(p.db, { community: 10 });
    const thief = await createTestAccount(p.db, { community: 10 });
    const id = await upload(owner.liveKey, photoBytes('Nikon_D70.jpg'));
    const before = await lastUsed(id);
    for (const [url, body] of [
      ['/v1/analyze', { images: [{ uploadId: id }], modules: ['dating'] }],
      ['/v2/lookup', { uploadIds: [id] }],
      ['/v2/enrich', { uploadId: id, formats: ['xmp'] }],
      ['/v1/batches', { items: [{ uploadId: id }], modules: ['dating'] }],
      ['/v1/batches', { vehicles: [{ items: [{ uploadId: id }] }] }],
    ] as const) {
      const res = await post(thief.liveKey, url, body);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(404);
      expect(expectEnvelope(res.json()).message).toContain(`no upload "${id}" for this account`);
    }
    expect(await getBalance(p.db, thief.userId)).toMatchObject({ community: 10, reserved: 0 });
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [thief.userId])).rows[0].n).toBe(0);
    expect(await lastUsed(id)).toEqual(before);
  });

  it('an upload a refused request named (no credits) is unchanged and still usable', async () => {
    const user = await createTestAccount(p.db);
    const bytes = photoBytes('Pentax_K10D.jpg');
    const id = await upload(user.liveKey, bytes);
    const before = await lastUsed(id);
    const res = await post(user.liveKey, '/v1/analyze', { images: [{ uploadId: id }], preset: 'full-analysis' });
    expect(res.statusCode, res.body).toBe(402);
    expect(await lastUsed(id)).toEqual(before);
    expect((await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
    // Its bytes are still there for the next request.
    const lookup = await post(user.liveKey, '/v2/lookup', { uploadIds: [id] });
    expect(lookup.json().results[sha(bytes)]).toMatchObject({ matchType: 'none' });
  });

  it('an expired upload is a clear 404 saying it expired on analyze, lookup, enrich and both kinds of batch, and changes nothing', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const id = await upload(user.liveKey, photoBytes('gps-DSCN0010.jpg'));
    // Its own clock moved back past the TTL (a sweep dated ahead would expire the uploads of every
    // test file running alongside on the same database).
    await p.db.query(`UPDATE uploads SET last_used_at = now() - make_interval(secs => $2) - interval '1 minute' WHERE id = $1`, [id, p.config.UPLOAD_TTL_MS / 1000]);
    await createUploads({ db: p.db, blobs: blobStoreFromConfig(p.config), config: p.config, onSettled: noUploadWaiters }).sweep();
    for (const [url, body] of [
      ['/v1/analyze', { images: [{ uploadId: id }], modules: ['dating'] }],
      ['/v2/lookup', { uploadIds: [id] }],
      ['/v2/enrich', { uploadId: id, formats: ['xmp'] }],
      ['/v1/batches', { items: [{ uploadId: id }], modules: ['dating'] }],
      ['/v1/batches', { vehicles: [{ name: 'van', items: [{ uploadId: id }] }] }],
    ] as const) {
      const res = await post(user.liveKey, url, body);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(404);
      const error = expectEnvelope(res.json());
      expect(error.code).toBe('NOT_FOUND');
      expect(error.message, url).toMatch(/expired .*upload the photo again/);
    }
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
  });

  it('a photo batch and a vehicle batch take upload ids and run them to completion', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const files = ['gps-DSCN0012.jpg', 'gps-DSCN0021.jpg', 'mobile-jolla.jpg'];
    const ids = await Promise.all(files.map((f) => upload(user.liveKey, photoBytes(f))));
    const photos = await post(user.liveKey, '/v1/batches', { items: ids.map((uploadId, i) => ({ uploadId, name: files[i] })), modules: ['dating'] });
    expect(photos.statusCode, photos.body).toBe(202);
    const vehicles = await post(user.liveKey, '/v1/batches', { vehicles: [{ name: 'car', vehicle: { vin: 'WVWZZZ1JZ3W000001' }, items: ids.map((uploadId) => ({ uploadId })) }] });
    expect(vehicles.statusCode, vehicles.body).toBe(202);
    for (const batch of [photos.json(), vehicles.json()]) {
      await expect.poll(async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}`, headers: bearer(user.liveKey) })).json().status, { timeout: 120_000, interval: 250 }).toBe('completed');
    }
    const items = (await p.app.inject({ method: 'GET', url: `/v1/batches/${photos.json().id}/items`, headers: bearer(user.liveKey) })).json().items;
    expect(items.map((it: { source: string; status: string; sha256: string }) => [it.source, it.status, it.sha256])).toEqual(files.map((f) => [f, 'done', sha(photoBytes(f))]));
    const report = (await p.app.inject({ method: 'GET', url: `/v1/batches/${vehicles.json().id}/items`, headers: bearer(user.liveKey) })).json().items[0];
    expect(report).toMatchObject({ status: 'done', source: 'car' });
    expect(report.photos.map((ph: { sha256: string }) => ph.sha256)).toEqual(files.map((f) => sha(photoBytes(f))));
  });

  it('analyze takes multipart/form-data from curl -F: photos as file parts, the JSON fields as one part', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const dir = mkdtempSync(path.join(tmpdir(), 'lenstack-multipart-'));
    const car = path.join(dir, 'car.jpg');
    writeFileSync(car, photoBytes('hdr-canon_hdr_NO.jpg'));
    const { stdout } = await promisify(execFile)('curl', [
      '-sS', '-X', 'POST', `${base}/v1/analyze`,
      '-H', `Authorization: Bearer ${user.liveKey}`,
      '-F', `photo=@${car}`,
      '-F', 'request={"modules":["dating"],"options":{"includeFingerprint":true}};type=application/json',
      '-w', '\n%{http_code}',
    ]);
    const [body, status] = [stdout.slice(0, stdout.lastIndexOf('\n')), stdout.slice(stdout.lastIndexOf('\n') + 1)];
    expect(status, body).toBe('200');
    const a = JSON.parse(body);
    expect(a.output.images[0]).toMatchObject({ index: 0, sha256: sha(photoBytes('hdr-canon_hdr_NO.jpg')) });
    expect(a.usage.modulesUsed).toContain('dating');
    // The request's own uploads are gone once it is answered; the photo is in the registry.
    await expect.poll(async () => (await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
    expect((await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId])).rows[0].n).toBe(1);

    // Just a photo, no JSON part: the default stack runs.
    const bare = await promisify(execFile)('curl', ['-sS', '-X', 'POST', `${base}/v1/analyze`, '-H', `Authorization: Bearer ${user.liveKey}`, '-F', `photo=@${car}`, '-w', '\n%{http_code}']);
    expect(bare.stdout.slice(bare.stdout.lastIndexOf('\n') + 1), bare.stdout).toBe('200');

    // Not an image: 422 in the envelope, nothing kept.
    const junk = path.join(dir, 'notes.txt');
    writeFileSync(junk, 'not a photo');
    const bad = await promisify(execFile)('curl', ['-sS', '-X', 'POST', `${base}/v1/analyze`, '-H', `Authorization: Bearer ${user.liveKey}`, '-F', `photo=@${junk}`, '-w', '\n%{http_code}']);
    expect(bad.stdout.slice(bad.stdout.lastIndexOf('\n') + 1), bad.stdout).toBe('422');
    expect(expectEnvelope(JSON.parse(bad.stdout.slice(0, bad.stdout.lastIndexOf('\n')))).code).toBe('IMAGE_INVALID');
    expect((await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
  });

  it('an idempotent resend of an answered analyze gets the stored answer after its uploads were deleted or expired, billed once', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const deleted = await upload(user.liveKey, photoBytes('orientation-landscape_1.jpg'));
    const expired = await upload(user.liveKey, photoBytes('orientation-portrait_8.jpg'));
    const body = { images: [{ uploadId: deleted }, { uploadId: expired }], modules: ['dating'] };
    const rid = { 'x-request-id': `resend-${deleted}` };
    const first = await post(user.liveKey, '/v1/analyze', body, rid);
    expect(first.statusCode, first.body).toBe(200);
    const balance = await getBalance(p.db, user.userId);
    const del = await p.app.inject({ method: 'DELETE', url: `/v1/uploads/${deleted}`, headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0' } });
    expect(del.statusCode, del.body).toBe(204);
    await p.db.query(`UPDATE uploads SET expired_at = now() WHERE id = $1`, [expired]);
    const again = await post(user.liveKey, '/v1/analyze', body, rid);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toEqual(first.json());
    expect(await getBalance(p.db, user.userId)).toEqual(balance);
    // Without its request id, the same body is a new request: the deleted upload is 404.
    const fresh = await post(user.liveKey, '/v1/analyze', body);
    expect(fresh.statusCode, fresh.body).toBe(404);
    // Another body under the same id is not answered from the store: its uploads are resolved (404).
    const other = await post(user.liveKey, '/v1/analyze', { images: [{ uploadId: expired }, { uploadId: deleted }], modules: ['dating'] }, rid);
    expect(other.statusCode, other.body).toBe(404);
  });

  it('a JSON body over the cap is 413 naming the upload route', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: { ...bearer(user.liveKey), 'content-type': 'application/json' },
      payload: JSON.stringify({ imageBase64: 'A'.repeat(p.config.MAX_BODY_BYTES + 10) }),
    });
    expect(res.statusCode).toBe(413);
    expect(expectEnvelope(res.json()).message).toContain('POST /v1/uploads');
  });
});
