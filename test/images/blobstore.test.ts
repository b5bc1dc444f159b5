import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BlobNotFoundError, FsBlobStore, type BlobStore } from '../../images/blobstore.ts';
import { ensureBucket, S3BlobStore } from '../../images/s3-blobstore.ts';
import { startS3Server, type S3Server } from '../../tools/scripts/s3-server.ts';
import { photo } from './photos.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');


/**
 * What every blob store promises, run against the filesystem store and against a real
 * S3-compatible server (versitygw, built with go install) through the official AWS SDK.
 */
const stores: Array<[string, () => Promise<{ store: BlobStore; cleanup(): Promise<void> }>]> = [
  [
    'FsBlobStore',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'lenstack-blobs-'));
      return { store: new FsBlobStore(dir), cleanup: () => rm(dir, { recursive: true, force: true }) };
    },
  ],
  [
    'S3BlobStore (versitygw)',
    async () => {
      const bucket = `blobs-${randomBytes(4).toString('hex')}`;
      await s3Client.send(new CreateBucketCommand({ Bucket: bucket }));
      return { store: new S3BlobStore({ client: s3Client, bucket, prefix: 'lenstack/' }), cleanup: async () => {} };
    },
  ],
];

let s3: S3Server;
let s3Client: S3Client;
beforeAll(async () => {
  s3 = await startS3Server();
  s3Client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
}, 300_000);
afterAll(async () => {
  s3Client?.destroy();
  await s3?.stop();
});

describe.each(stores)('%s: the blob store contract', (_name, make) => {
  let store: BlobStore;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ store, cleanup } = await make());
  });
  afterEach(() => cleanup());
  const bytes = photo('Nikon_D70.jpg');
  const key = sha(bytes);

  it('round-trips bytes; concurrent puts of one blob all succeed and one says it created it', async () => {
    expect(await store.has(key)).toBe(false);
    const created = await Promise.all([store.put(key, bytes), store.put(key, bytes), store.put(key, bytes)]);
    expect(created.filter(Boolean).length).toBeGreaterThanOrEqual(1);
    expect(await store.has(key)).toBe(true);
    expect((await store.get(key)).equals(bytes)).toBe(true);
  });

  it('reports a missing blob with a clear, typed error', async () => {
    const missing = 'f'.repeat(64);
    await expect(store.get(missing)).rejects.toBeInstanceOf(BlobNotFoundError);
    await expect(store.get(missing)).rejects.toMatchObject({ code: 'BLOB_NOT_FOUND', sha256: missing, message: expect.stringContaining(missing) });
  });

  it('refuses keys that are not lowercase hex SHA-256 (no path tricks)', async () => {
    for (const bad of ['../../etc/passwd', key.toUpperCase(), key.slice(1), `${key}0`, '']) {
      await expect(store.put(bad, bytes)).rejects.toBeInstanceOf(RangeError);
      await expect(store.get(bad)).rejects.toBeInstanceOf(RangeError);
      await expect(store.has(bad)).rejects.toBeInstanceOf(RangeError);
    }
  });

  it('refuses bytes that do not hash to the key, and writes nothing under a key it holds already', async () => {
    const other = 'a'.repeat(64);
    await expect(store.put(other, bytes)).rejects.toThrow(/hashes to/);
    expect(await store.has(other)).toBe(false);
    await store.put(key, bytes);
    expect(await store.put(key, Buffer.from('not the same bytes'))).toBe(false);
    expect((await store.get(key)).equals(bytes)).toBe(true);
  });

  it('stores a verified put under its key as given (its caller hashed these bytes), and still writes nothing under a key it holds', async () => {
    expect(await store.put(key, bytes, { verified: true })).toBe(true);
    expect((await store.get(key)).equals(bytes)).toBe(true);
    expect(await store.put(key, Buffer.from('not the same bytes'), { verified: true })).toBe(false);
    expect((await store.get(key)).equals(bytes)).toBe(true);
  });

  it('says whether a put created the blob, lists what is stored with its size, and deletes (absent: a no-op)', async () => {
    const second = photo('Canon_40D.jpg');
    expect(await store.put(key, bytes)).toBe(true);
    expect(await store.put(key, bytes)).toBe(false);
    await store.put(sha(second), second);
    const listed = [];
    for await (const b of store.list()) listed.push(b);
    expect(listed.sort((a, b) => a.sha256.localeCompare(b.sha256))).toEqual(
      [
        { sha256: key, writtenAt: expect.any(Date), bytes: bytes.length },
        { sha256: sha(second), writtenAt: expect.any(Date), bytes: second.length },
      ].sort((a, b) => a.sha256.localeCompare(b.sha256)),
    );
    expect(Math.abs(listed[0]!.writtenAt.getTime() - Date.now())).toBeLessThan(10 * 60_000);
    await store.delete(key);
    expect(await store.has(key)).toBe(false);
    await store.delete(key);
    const after = [];
    for await (const b of store.list()) after.push(b.sha256);
    expect(after).toEqual([sha(second)]);
  });
});

describe('S3BlobStore specifics', () => {
  const bytes = photo('Nikon_D70.jpg');
  const key = sha(bytes);

  it('keys shard like the filesystem paths under the prefix, and objects outside that layout are not listed', async () => {
    const bucket = `blobs-${randomBytes(4).toString('hex')}`;
    await s3Client.send(new CreateBucketCommand({ Bucket: bucket }));
    const store = new S3BlobStore({ client: s3Client, bucket, prefix: 'lenstack/' });
    await store.put(key, bytes);
    // Someone else's object in the same bucket, and a stray one under the prefix.
    await s3Client.send(new PutObjectCommand({ Bucket: bucket, Key: `other-app/${key}`, Body: 'x' }));
    await s3Client.send(new PutObjectCommand({ Bucket: bucket, Key: `lenstack/${key}`, Body: 'x' }));
    const head = await s3Client.send(new HeadObjectCommand({ Bucket: bucket, Key: `lenstack/${key.slice(0, 2)}/${key.slice(2, 4)}/${key}` }));
    expect(head.ContentLength).toBe(bytes.length);
    const listed = [];
    for await (const b of store.list()) listed.push(b.sha256);
    expect(listed).toEqual([key]);
  });

  it('a verified put is not hashed here, but the server still refuses bytes that are not the key\'s (ChecksumSHA256)', async () => {
    const bucket = `blobs-${randomBytes(4).toString('hex')}`;
    await s3Client.send(new CreateBucketCommand({ Bucket: bucket }));
    const store = new S3BlobStore({ client: s3Client, bucket });
    const other = sha(photo('Canon_40D.jpg'));
    await expect(store.put(other, bytes, { verified: true })).rejects.toThrow();
    expect(await store.has(other)).toBe(false);
  });

  it('ensureBucket makes a missing bucket once, also when replicas race', async () => {
    const bucket = `made-${randomBytes(4).toString('hex')}`;
    const made = await Promise.all([ensureBucket(s3Client, bucket), ensureBucket(s3Client, bucket), ensureBucket(s3Client, bucket)]);
    expect(made.some(Boolean)).toBe(true);
    expect(await ensureBucket(s3Client, bucket)).toBe(false);
    const store = new S3BlobStore({ client: s3Client, bucket });
    expect(await store.put(key, bytes)).toBe(true);
  });

  it('wrong credentials are an error, never "not found"', async () => {
    const bucket = `blobs-${randomBytes(4).toString('hex')}`;
    await s3Client.send(new CreateBucketCommand({ Bucket: bucket }));
    const wrong = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: 'not-the-secret' }, maxAttempts: 1 });
    const store = new S3BlobStore({ client: wrong, bucket });
    await expect(store.has(key)).rejects.toThrow();
    await expect(store.get(key)).rejects.not.toBeInstanceOf(BlobNotFoundError);
    wrong.destroy();
  });
});

describe('FsBlobStore specifics', () => {
  let root: string;
  let store: FsBlobStore;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'lenstack-blobs-'));
    store = new FsBlobStore(root);
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  const bytes = photo('Nikon_D70.jpg');
  const key = sha(bytes);

  it('round-trips bytes under a sharded path ab/cd/<sha256>', async () => {
    expect(await store.has(key)).toBe(false);
    await store.put(key, bytes);
    expect(await store.has(key)).toBe(true);
    expect((await store.get(key)).equals(bytes)).toBe(true);
    const onDisk = join(root, key.slice(0, 2), key.slice(2, 4), key);
    expect(store.pathOf(key)).toBe(onDisk);
    expect((await readFile(onDisk)).equals(bytes)).toBe(true);
  });

  it('a verified put skips the check: its key is taken as given (only a caller that hashed these very bytes may say so)', async () => {
    const other = sha(photo('Canon_40D.jpg'));
    expect(await store.put(other, bytes, { verified: true })).toBe(true);
    expect((await store.get(other)).equals(bytes)).toBe(true);
  });

  it('stages bytes unseen until committed; a discard leaves nothing; a blob stored meanwhile is not created twice', async () => {
    const shard = join(root, key.slice(0, 2), key.slice(2, 4));
    const staged = await store.stage(key, bytes);
    // Written and synced, but under no name a reader or the collector sees.
    expect(await store.has(key)).toBe(false);
    const listed: string[] = [];
    for await (const b of store.list()) listed.push(b.sha256);
    expect(listed).toEqual([]);
    expect((await readdir(shard)).filter((n) => n.endsWith('.tmp'))).toHaveLength(1);
    expect(await staged.commit()).toBe(true);
    expect((await store.get(key)).equals(bytes)).toBe(true);
    await expect(staged.commit()).rejects.toThrow(/already committed or discarded/);
    expect(await readdir(shard)).toEqual([key]);

    // Stored already when staged: nothing is written, and the commit says it created nothing.
    const again = await store.stage(key, bytes);
    expect(await readdir(shard)).toEqual([key]);
    expect(await again.commit()).toBe(false);
    // Gone again between the stage and the commit (another request's clean-up): the commit writes it.
    const third = await store.stage(key, bytes);
    await store.delete(key);
    expect(await third.commit()).toBe(true);
    expect((await store.get(key)).equals(bytes)).toBe(true);

    const other = photo('Canon_40D.jpg');
    const dropped = await store.stage(sha(other), other);
    await dropped.discard();
    await dropped.discard();
    expect(await store.has(sha(other))).toBe(false);
    expect(await readdir(join(root, sha(other).slice(0, 2), sha(other).slice(2, 4)))).toEqual([]);
    // The key is checked at the stage, as for a put.
    await expect(store.stage(sha(other), bytes)).rejects.toThrow(/hashes to/);
  });

  it('a listing asked to remove the temporary files of writes never named, once they are older than asked, and nothing else', async () => {
    const shard = join(root, key.slice(0, 2), key.slice(2, 4));
    await store.put(key, bytes);
    const abandoned = await store.stage(sha(photo('Canon_40D.jpg')), photo('Canon_40D.jpg')); // its process "died": never committed
    const otherShard = join(root, sha(photo('Canon_40D.jpg')).slice(0, 2), sha(photo('Canon_40D.jpg')).slice(2, 4));
    const tmp = (await readdir(otherShard))[0]!;
    expect(tmp).toMatch(/\.tmp$/);
    const listed = async (removeTemporaryBefore?: Date) => {
      const out: string[] = [];
      for await (const b of store.list(removeTemporaryBefore ? { removeTemporaryBefore } : {})) out.push(b.sha256);
      return out;
    };
    expect(await listed(new Date(Date.now() - 3600_000))).toEqual([key]);
    expect(await readdir(otherShard)).toEqual([tmp]); // younger than the grace: kept
    const old = new Date(Date.now() - 2 * 3600_000);
    await utimes(join(otherShard, tmp), old, old);
    await utimes(store.pathOf(key), old, old);
    expect(await listed()).toEqual([key]);
    expect(await readdir(otherShard)).toEqual([tmp]); // a plain listing removes nothing
    expect(await listed(new Date(Date.now() - 3600_000))).toEqual([key]);
    expect(await readdir(otherShard)).toEqual([]);
    // A named blob is never a temporary file, however old.
    expect(await readdir(shard)).toEqual([key]);
    await expect(abandoned.commit()).rejects.toThrow();
  });

  it('is idempotent, also under concurrent puts, and leaves no temp files', async () => {
    await Promise.all([store.put(key, bytes), store.put(key, bytes), store.put(key, bytes)]);
    await store.put(key, bytes);
    const shard = join(root, key.slice(0, 2), key.slice(2, 4));
    expect(await readdir(shard)).toEqual([key]);
    expect((await store.get(key)).equals(bytes)).toBe(true);
  });
});
