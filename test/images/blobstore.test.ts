import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobNotFoundError, FsBlobStore } from '../../images/blobstore.ts';
import { photo } from './photos.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('FsBlobStore', () => {
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

  it('is idempotent, also under concurrent puts, and leaves no temp files', async () => {
    await Promise.all([store.put(key, bytes), store.put(key, bytes), store.put(key, bytes)]);
    await store.put(key, bytes);
    const shard = join(root, key.slice(0, 2), key.slice(2, 4));
    expect(await readdir(shard)).toEqual([key]);
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

  it('refuses bytes that do not hash to the key', async () => {
    const other = 'a'.repeat(64);
    await expect(store.put(other, bytes)).rejects.toThrow(/hashes to/);
    expect(await store.has(other)).toBe(false);
  });

  it('writes nothing under a key it holds already, whatever bytes come with it', async () => {
    await store.put(key, bytes);
    expect(await store.put(key, Buffer.from('not the same bytes'))).toBe(false);
    expect((await store.get(key)).equals(bytes)).toBe(true);
  });

  it('says whether a put created the blob, lists what is stored with its size, and deletes (absent: a no-op)', async () => {
    expect(await store.put(key, bytes)).toBe(true);
    expect(await store.put(key, bytes)).toBe(false);
    const listed = [];
    for await (const b of store.list()) listed.push(b);
    expect(listed).toEqual([{ sha256: key, writtenAt: expect.any(Date), bytes: bytes.length }]);
    await store.delete(key);
    expect(await store.has(key)).toBe(false);
    await store.delete(key);
    const after = [];
    for await (const b of store.list()) after.push(b);
    expect(after).toEqual([]);
  });
});
