import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants } from '../../credits/ledger.ts';
import { dropDatabase } from '../../db/migrate.ts';
import { createPool } from '../../db/pool.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { backup, restore } from '../../tools/scripts/backup.ts';
import { startS3Server, type S3Server } from '../../tools/scripts/s3-server.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Erasure and backups with BLOB_STORE=s3 (versitygw, the official AWS SDK): an erased photo's
 * object leaves the bucket; a backup copies the bucket's blobs and a restore puts them into an
 * empty bucket (docs/backup.md, docs/privacy.md).
 */
let s3: S3Server;
let p: Pipeline;
let client: S3Client;
let restoredUrl: string;
const s3Config = (bucket: string) => ({
  BLOB_STORE: 's3',
  S3_BUCKET: bucket,
  S3_PREFIX: 'blobs/',
  S3_ENDPOINT: s3.endpoint,
  S3_FORCE_PATH_STYLE: 'true',
  S3_ACCESS_KEY_ID: s3.accessKeyId,
  S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
});
beforeAll(async () => {
  s3 = await startS3Server();
  client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
  for (const bucket of ['live-blobs', 'restored-blobs']) await client.send(new CreateBucketCommand({ Bucket: bucket }));
  p = await startPipeline({ config: s3Config('live-blobs') });
  const url = new URL(p.config.DATABASE_URL);
  url.pathname = `/lenstack_restore_s3_${randomBytes(4).toString('hex')}`;
  restoredUrl = url.toString();
}, 300_000);
afterAll(async () => {
  await p?.close();
  client?.destroy();
  await dropDatabase(restoredUrl).catch(() => {});
  await s3?.stop();
});

async function noiseJpeg(): Promise<Buffer> {
  return sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
}
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const keyOf = (sha256: string) => `blobs/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`;
const exists = async (bucket: string, sha256: string) =>
  client.send(new HeadObjectCommand({ Bucket: bucket, Key: keyOf(sha256) })).then(() => true, (err: { name?: string }) => (err.name === 'NotFound' ? false : Promise.reject(err)));

describe('with the S3 blob store', () => {
  it('an erased photo leaves the bucket; a backup of the bucket restores into an empty one', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const [erased, kept] = [await noiseJpeg(), await noiseJpeg()];
    for (const img of [erased, kept]) {
      const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageBase64: img.toString('base64'), modules: ['dating'] } });
      expect(res.statusCode, res.body).toBe(200);
    }
    expect(await exists('live-blobs', sha(erased))).toBe(true);
    const del = await p.app.inject({ method: 'DELETE', url: `/v1/photos/${sha(erased)}`, headers: bearer(user.liveKey) });
    expect(del.statusCode, del.body).toBe(200);
    expect(await exists('live-blobs', sha(erased))).toBe(false);
    expect(await exists('live-blobs', sha(kept))).toBe(true);

    const dir = path.join(await mkdtemp(path.join(tmpdir(), 'lenstack-backup-s3-')), 'b');
    const made = await backup(p.config, dir);
    const copy = new FsBlobStore(path.join(dir, 'blobs'));
    expect(await copy.has(sha(kept))).toBe(true);
    expect(await copy.has(sha(erased))).toBe(false);

    const target = testConfig(s3Config('restored-blobs'));
    const restoredConfig = { ...target, DATABASE_URL: restoredUrl };
    expect((await restore(restoredConfig, dir)).blobs).toBe(made.blobs);
    const body = await (await client.send(new GetObjectCommand({ Bucket: 'restored-blobs', Key: keyOf(sha(kept)) }))).Body!.transformToByteArray();
    expect(Buffer.compare(Buffer.from(body), kept)).toBe(0);
    expect(await exists('restored-blobs', sha(erased))).toBe(false);
    const db = createPool(restoredUrl, { max: 2 });
    try {
      const photos = await db.query<{ sha256: string }>('SELECT sha256 FROM photos WHERE user_id = $1', [user.userId]);
      expect(photos.rows.map((r) => r.sha256)).toEqual([sha(kept)]);
      expect((await checkInvariants(db)).filter((r) => !r.ok)).toEqual([]);
    } finally {
      await db.end();
    }
  }, 240_000);
});
