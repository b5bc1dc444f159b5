import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { startS3Server, type S3Server } from '../../tools/scripts/s3-server.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * BLOB_STORE=s3: the API stores the photo in the bucket and the worker, which shares no directory
 * with it, reads it from there for the vendor call — the setup of API and workers on several hosts.
 * Against a real S3-compatible server (versitygw) through the official AWS SDK.
 */
let s3: S3Server;
let p: Pipeline;
let client: S3Client;
const BUCKET = 'lenstack-blobs';

beforeAll(async () => {
  s3 = await startS3Server();
  client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
  await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  p = await startPipeline({
    config: {
      BLOB_STORE: 's3',
      S3_BUCKET: BUCKET,
      S3_PREFIX: 'blobs/',
      S3_ENDPOINT: s3.endpoint,
      S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    },
  });
  await p.startWorker();
}, 300_000);
afterAll(async () => {
  await p?.close();
  client?.destroy();
  await s3?.stop();
});

describe('the S3 blob store end to end', () => {
  it('an analysis stores the photo in the bucket (not on local disk), and the worker reads it from there for the vendor', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('Canon_40D.jpg');
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { images: [{ base64: bytes.toString('base64') }], modules: ['dating'] },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().usage.creditsCharged).toBeGreaterThan(0);
    const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `blobs/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}` }));
    expect(head.ContentLength).toBe(bytes.length);
    expect(existsSync(join(p.config.BLOB_DIR, sha256.slice(0, 2), sha256.slice(2, 4), sha256))).toBe(false);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ reserved: 0 });
    // The vendor saw the photo the worker fetched from the bucket.
    expect(Object.values(p.sim.stats()).reduce((n, v) => n + v.calls, 0)).toBe(1);
  });
});
