import { noUploadWaiters } from '../helpers/deps.ts';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { FileStore } from '@tus/file-store';
import { Upload } from '@tus/utils';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createUploads } from '../../uploads/service.ts';
import { buildTestApp, createTestAccount, type TestApp } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';

/**
 * Finishing an upload twice at once (docs/reliability.md): onUploadFinish is reading the bytes when
 * a request names the upload, finds every byte arrived but no hash yet, and finishes it too. The
 * second must wait for the first and answer its result, never read bytes that are gone (a 500).
 */
let a: TestApp;
beforeAll(async () => {
  a = await buildTestApp();
}, 60_000);
afterAll(async () => a?.close());

/** A FileStore whose first read waits until the test opens its gate. */
class GatedStore extends FileStore {
  reads = 0;
  firstReadStarted!: () => void;
  readonly started = new Promise<void>((r) => (this.firstReadStarted = r));
  open!: () => void;
  readonly gate = new Promise<void>((r) => (this.open = r));
  override read(id: string): ReturnType<FileStore['read']> {
    if (++this.reads === 1) {
      this.firstReadStarted();
      const gated = async function* (self: GatedStore) {
        await self.gate;
        yield* self.readSuper(id) as AsyncIterable<Buffer>;
      };
      return Readable.from(gated(this)) as unknown as ReturnType<FileStore['read']>;
    }
    return super.read(id);
  }
  readSuper(id: string) {
    return super.read(id);
  }
}

describe('finishing an upload twice at once', () => {
  it('the second finisher waits for the first and returns the same finished upload; the blob is there', async () => {
    const user = await createTestAccount(a.db);
    const store = new GatedStore({ directory: mkdtempSync(path.join(tmpdir(), 'lenstack-race-')) });
    const blobs = new FsBlobStore(a.config.BLOB_DIR);
    const uploads = createUploads({ db: a.db, blobs, config: a.config, datastore: store, onSettled: noUploadWaiters });
    const bytes = photoBytes('Canon_40D.jpg');
    // Every byte arrived, nothing recorded yet: the state while onUploadFinish runs.
    const id = `upl_${randomBytes(16).toString('hex')}`;
    await a.db.query('INSERT INTO uploads (id, user_id, size) VALUES ($1, $2, $3)', [id, user.userId, bytes.length]);
    await store.create(new Upload({ id, offset: 0, size: bytes.length, metadata: {} }));
    await store.write(Readable.from([bytes]), id, 0);

    const first = uploads.resolve(user.userId, [{ id, at: 'first' }]);
    await store.started;
    let secondDone = false;
    const second = uploads.resolve(user.userId, [{ id, at: 'second' }]).finally(() => (secondDone = true));
    second.catch(() => undefined);
    // Let the first read go once the second has either finished on its own or waits on the row lock.
    const waitsOnLock = async () =>
      (await a.db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM uploads WHERE id = $1 FOR UPDATE%'`)).rows[0].n > 0;
    while (!secondDone && !(await waitsOnLock())) await delay(10);
    store.open();

    const [one, two] = await Promise.allSettled([first, second]);
    const sha = createHash('sha256').update(bytes).digest('hex');
    expect(one.status === 'fulfilled' ? one.value : one.reason).toEqual([expect.objectContaining({ id, sha256: sha, format: 'jpeg' })]);
    expect(two.status === 'fulfilled' ? two.value : two.reason).toEqual([expect.objectContaining({ id, sha256: sha, format: 'jpeg' })]);
    expect(createHash('sha256').update(await blobs.get(sha)).digest('hex')).toBe(sha);
    expect((await a.db.query('SELECT sha256 FROM uploads WHERE id = $1', [id])).rows[0].sha256).toBe(sha);
  });
});
