import { noUploadWaiters } from '../helpers/deps.ts';
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Transform, type Readable } from 'node:stream';
import { FileStore } from '@tus/file-store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createUploads } from '../../uploads/service.ts';
import { bearer, buildTestApp, createTestAccount, type TestApp } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';

/**
 * One writer per upload across processes (uploads/locker.ts; docs/decisions.md "One writer per
 * upload"). Process A stores what it receives slowly (a datastore that waits between chunks, as a
 * loaded disk or a distant bucket does); while its PATCH is still being written, the client asks
 * process B where the upload stands. B must not answer until A has let go, and A must write
 * nothing after B answered: otherwise the client sends the rest from an offset A then writes past,
 * two writers on one upload (with S3's parts, the right size and the wrong bytes).
 */
class SlowFileStore extends FileStore {
  override write(readable: Readable, id: string, offset: number): Promise<number> {
    const slow = new Transform({
      highWaterMark: 1,
      transform(chunk: Buffer, _enc, done) {
        setTimeout(() => done(null, chunk), 40);
      },
    });
    readable.pipe(slow);
    readable.on('error', (err) => slow.destroy(err));
    return super.write(slow, id, offset);
  }
}

let a: TestApp;
let b: TestApp;
const urlOf = (t: TestApp) => `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;

beforeAll(async () => {
  b = await buildTestApp();
  // A shares B's database and upload directory; only its writes are slow.
  const dir = `${b.config.BLOB_DIR}-uploads`;
  a = await buildTestApp({
    deps: { uploads: createUploads({ db: b.db, blobs: new FsBlobStore(b.config.BLOB_DIR), config: b.config, datastore: new SlowFileStore({ directory: dir }), onSettled: noUploadWaiters }) },
  });
  for (const t of [a, b]) await t.app.listen({ port: 0, host: '127.0.0.1' });
}, 120_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
});

describe('one writer per upload, whichever process the client reaches', () => {
  it('a HEAD on B while A is still writing a PATCH waits for A to let go, and A writes nothing after it', async () => {
    const user = await createTestAccount(b.db);
    const bytes = photoBytes('hdr-canon_hdr_YES.jpg');
    const created = await fetch(`${urlOf(b)}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(bytes.length) } });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    const file = `${b.config.BLOB_DIR}-uploads/${location.split('/').pop()!}`;
    const size = () => statSync(file, { throwIfNoEntry: false })?.size ?? 0;

    // Half the photo to A, all of it sent at once; A stores it a chunk every 40 ms.
    const half = bytes.subarray(0, Math.floor(bytes.length / 2));
    const patchA = new Promise<void>((resolve) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port: (a.app.server.address() as AddressInfo).port,
        method: 'PATCH',
        path: location,
        headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream', 'content-length': String(half.length) },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.end(half);
    });
    // A has begun writing, and has not finished.
    await expect.poll(size, { timeout: 30_000, interval: 5 }).toBeGreaterThan(0);
    expect(size()).toBeLessThan(half.length);

    const head = await fetch(`${urlOf(b)}${location}`, { method: 'HEAD', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0' } });
    expect(head.status).toBe(200);
    const offset = Number(head.headers.get('upload-offset'));
    await patchA;
    // What B said is what is stored: A let go before B answered, and wrote nothing since.
    expect(size()).toBe(offset);
    expect(offset).toBeGreaterThan(0);

    // The rest from there, through B: the upload is the photo, byte for byte.
    const rest = await fetch(`${urlOf(b)}${location}`, {
      method: 'PATCH',
      headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' },
      body: bytes.subarray(offset),
    });
    expect(rest.status).toBe(204);
    const id = location.split('/').pop()!;
    expect((await b.db.query('SELECT sha256 FROM uploads WHERE id = $1', [id])).rows[0].sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    // The lease is given back.
    expect((await b.db.query('SELECT lock_token, release_wanted FROM uploads WHERE id = $1', [id])).rows[0]).toEqual({ lock_token: null, release_wanted: false });
  }, 60_000);
});
