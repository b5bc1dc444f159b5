import { noUploadWaiters } from '../helpers/deps.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { FileStore } from '@tus/file-store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { createUploads } from '../../uploads/service.ts';
import { buildTestApp, createTestAccount, type TestApp } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';

/**
 * A database connection lost while finishing an upload holds it (docs/reliability.md "Chaos": the
 * full chaos run's two API processes both died of it). The finishing transaction keeps its client
 * checked out while it reads the upload's bytes; when the connection is reset meanwhile, the
 * client emits 'error' with no listener, and Node ends the process. The upload must fail (the
 * caller gets a 503 and sends it again) and the process go on.
 */
let a: TestApp;
let pool: Db;
const APPLICATION = `lenstack-upload-lost-${process.pid}`;
beforeAll(async () => {
  a = await buildTestApp();
  pool = createPool(a.config.DATABASE_URL, { application: APPLICATION });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await a?.close();
});

/** A FileStore whose reads wait until the test opens its gate (the bytes being read while the row is locked). */
class GatedStore extends FileStore {
  readStarted!: () => void;
  readonly started = new Promise<void>((r) => (this.readStarted = r));
  open!: () => void;
  readonly gate = new Promise<void>((r) => (this.open = r));
  override read(id: string): ReturnType<FileStore['read']> {
    this.readStarted();
    const gated = async function* (self: GatedStore) {
      await self.gate;
      yield* self.readSuper(id) as AsyncIterable<Buffer>;
    };
    return Readable.from(gated(this)) as unknown as ReturnType<FileStore['read']>;
  }
  readSuper(id: string) {
    return super.read(id);
  }
}

/**
 * The finishing transaction holds the upload's row lock and waits for the bytes: its backend is
 * idle in transaction. Terminate it, and wait until it is gone (its FATAL sent to the client).
 */
async function terminateFinishingBackend(): Promise<void> {
  const backend = async () =>
    (await a.db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'`, [APPLICATION])).rows[0]?.pid;
  let pid: number | undefined;
  while (pid === undefined) pid = await backend();
  await a.db.query('SELECT pg_terminate_backend($1)', [pid]);
  while ((await a.db.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount) {
    // until the backend is gone
  }
}

describe('a database connection lost while an upload finishes', () => {
  it('fails that upload and leaves the process running, its pool serving', async () => {
    const user = await createTestAccount(a.db);
    const store = new GatedStore({ directory: mkdtempSync(path.join(tmpdir(), 'lenstack-lost-')) });
    const uploads = createUploads({ db: pool, blobs: new FsBlobStore(a.config.BLOB_DIR), config: a.config, datastore: store, onSettled: noUploadWaiters });
    const bytes = photoBytes('Canon_40D.jpg');
    const unhandled: unknown[] = [];
    const onUncaught = (err: unknown) => unhandled.push(err);
    // What would end an API process: recorded here instead, so the test can say so.
    const vitestListeners = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', onUncaught);
    try {
      const ingest = uploads.ingest(user.userId, Readable.from([bytes]), { maxBytes: a.config.IMAGE_MAX_BYTES });
      ingest.catch(() => undefined);
      await store.started;
      await terminateFinishingBackend();
      store.open();
      await expect(ingest).rejects.toThrow(/terminat|Connection|ECONNRESET/i);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      for (const l of vitestListeners) process.on('uncaughtException', l as (err: Error) => void);
    }
    expect(unhandled).toEqual([]);
    // The pool discarded the broken client and serves the next query.
    expect((await pool.query<{ n: number }>('SELECT 1 AS n')).rows[0]!.n).toBe(1);
  }, 60_000);

  it('answers the PATCH that finishes the upload 503 with Retry-After, not 500; a resend after HEAD finishes it', async () => {
    const user = await createTestAccount(a.db);
    const store = new GatedStore({ directory: mkdtempSync(path.join(tmpdir(), 'lenstack-lost-')) });
    const uploads = createUploads({ db: pool, blobs: new FsBlobStore(a.config.BLOB_DIR), config: a.config, datastore: store, onSettled: noUploadWaiters });
    const t = await buildTestApp({ deps: { uploads } });
    try {
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const address = t.app.server.address() as { port: number };
      const base = `http://127.0.0.1:${address.port}`;
      const auth = { authorization: `Bearer ${user.liveKey}`, 'tus-resumable': '1.0.0' };
      const bytes = photoBytes('Canon_40D.jpg');
      const created = await fetch(`${base}/v1/uploads`, { method: 'POST', headers: { ...auth, 'upload-length': String(bytes.length) } });
      expect(created.status).toBe(201);
      const where = new URL(created.headers.get('location')!, base).pathname;
      const patched = fetch(`${base}${where}`, { method: 'PATCH', headers: { ...auth, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, body: bytes });
      await store.started;
      await terminateFinishingBackend();
      store.open();
      const res = await patched;
      const body = (await res.json()) as { error: { code: string; retryable: boolean } };
      expect([res.status, body.error.code, body.error.retryable]).toEqual([503, 'SERVICE_UNAVAILABLE', true]);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      // Every byte arrived: HEAD says so, and naming the upload finishes it.
      const head = await fetch(`${base}${where}`, { method: 'HEAD', headers: auth });
      expect(head.headers.get('upload-offset')).toBe(String(bytes.length));
      const id = where.split('/').pop()!;
      const [finished] = await uploads.resolve(user.userId, [{ id, at: 'id' }]);
      expect(finished).toEqual(expect.objectContaining({ id, format: 'jpeg' }));
    } finally {
      await t.close();
    }
  }, 60_000);
});
