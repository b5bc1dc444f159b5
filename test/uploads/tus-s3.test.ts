import { noUploadWaiters } from '../helpers/deps.ts';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { startS3Server, type S3Server } from '../../tools/scripts/s3-server.ts';
import { bearer, buildTestApp, createTestAccount, type TestApp, sendCut } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { Readable } from 'node:stream';
import { createUploads } from '../../uploads/service.ts';
import { testConfig } from '../harness/env.ts';

/**
 * BLOB_STORE=s3: uploads wait in the bucket (@tus/s3-store), so two API processes that share no
 * directory continue each other's uploads, and the finished photo lands in the blob prefix.
 * Against a real S3-compatible server (versitygw).
 */
let s3: S3Server;
let client: S3Client;
let a: TestApp;
let b: TestApp;
const BUCKET = 'lenstack-uploads';
beforeAll(async () => {
  s3 = await startS3Server();
  client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
  await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  const config = {
    BLOB_STORE: 's3',
    S3_BUCKET: BUCKET,
    S3_PREFIX: 'blobs/',
    S3_ENDPOINT: s3.endpoint,
    S3_FORCE_PATH_STYLE: 'true',
    S3_ACCESS_KEY_ID: s3.accessKeyId,
    S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
  } as const;
  // Each process its own local blob directory: nothing on disk is shared.
  const app = (name: string) => {
    const own = { ...config, BLOB_DIR: join(tmpdir(), `lenstack-s3-${name}-${process.pid}`) };
    return buildTestApp({ config: own, deps: { blobs: blobStoreFromConfig(testConfig(own)) } });
  };
  a = await app('a');
  b = await app('b');
  for (const t of [a, b]) await t.app.listen({ port: 0, host: '127.0.0.1' });
}, 300_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  client?.destroy();
  await s3?.stop();
});

const urlOf = (t: TestApp) => `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;

describe('tus uploads in the S3-compatible store', () => {
  it('a PATCH cut on one process is resumed by tus-js-client on another; the photo ends in the bucket under its SHA-256', async () => {
    const user = await createTestAccount(a.db);
    const bytes = photoBytes('hdr-canon_hdr_YES.jpg');
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const created = await fetch(`${urlOf(a)}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(bytes.length) } });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    await sendCut(`${urlOf(a)}${location}`, { method: 'PATCH', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-offset': '0' }, bytes, cutAt: Math.floor(bytes.length / 2) });
    const patchedFrom: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const up = new tus.Upload(bytes, {
        endpoint: `${urlOf(b)}/v1/uploads`,
        uploadUrl: `${urlOf(b)}${location}`,
        headers: bearer(user.liveKey),
        retryDelays: [200, 500, 1000],
        onBeforeRequest: (req) => {
          if (req.getMethod() === 'PATCH') patchedFrom.push(String(req.getHeader('Upload-Offset')));
        },
        onSuccess: () => resolve(),
        onError: reject,
      });
      up.start();
    });
    // Resumed where the bucket says, not from scratch on a new upload.
    expect(patchedFrom.length).toBeGreaterThanOrEqual(1);
    const id = location.split('/').pop()!;
    expect((await b.db.query('SELECT sha256, size::int FROM uploads WHERE id = $1', [id])).rows[0]).toEqual({ sha256, size: bytes.length });
    const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `blobs/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}` }));
    expect(head.ContentLength).toBe(bytes.length);
    expect((await blobStoreFromConfig(a.config).get(sha256)).equals(bytes)).toBe(true);
    // Nothing of it on either process's disk.
    for (const t of [a, b]) expect(existsSync(`${t.config.BLOB_DIR}-uploads`) ? readdirSync(`${t.config.BLOB_DIR}-uploads`) : []).toEqual([]);
  });

  it('a multipart analyze part (ingest, its size unknown until read) is finished in the bucket: hashed, its bytes stored under their SHA-256', async () => {
    const user = await createTestAccount(a.db);
    const uploads = createUploads({ db: a.db, blobs: blobStoreFromConfig(a.config), config: a.config, onSettled: noUploadWaiters });
    const bytes = photoBytes('mobile-jolla.jpg');
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    // In pieces, as a multipart body arrives.
    const pieces = [bytes.subarray(0, 1000), bytes.subarray(1000, 70_000), bytes.subarray(70_000)];
    const done = await uploads.ingest(user.userId, Readable.from(pieces), { maxBytes: a.config.IMAGE_MAX_BYTES });
    expect(done).toMatchObject({ sha256, format: 'jpeg', size: bytes.length });
    expect((await a.db.query('SELECT sha256, size::int FROM uploads WHERE id = $1', [done.id])).rows[0]).toEqual({ sha256, size: bytes.length });
    expect((await blobStoreFromConfig(a.config).get(sha256)).equals(bytes)).toBe(true);
  });
});
