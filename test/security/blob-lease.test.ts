import { createHash } from 'node:crypto';
import { utimes } from 'node:fs/promises';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore, type BlobStore, type PutOptions, type StagedBlob } from '../../images/blobstore.ts';
import { leaseBlob } from '../../registry/blob-leases.ts';
import { takeBatchPhoto } from '../../registry/intake.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { collectBlobs } from '../../worker/blob-collector.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Intake leases (issue 23 §5.1, docs/reliability.md "Intake leases"). Before: a request whose
 * intake found its bytes already stored (`put` answered "there already") held nothing on them, so
 * another request that had stored the same bytes and then failed deleted them, and so did the
 * collector when the blob was older than its grace: the first request's workflow then failed on a
 * missing blob. An account with 0 credits could make a paying account's analysis of the same photo
 * fail. Now: intake leases each blob before it stores it, and every delete skips leased blobs.
 */

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

/**
 * The real store, with a hook after each put of one watched blob (a staged write's commit, as
 * intake stores a photo, or a plain put): the test orders the requests there.
 */
class OrderedStore implements BlobStore {
  watch: { sha256: string; afterPut(created: boolean): Promise<void> } | null = null;
  constructor(readonly inner: FsBlobStore) {}
  async put(sha256: string, bytes: Buffer, opts?: PutOptions) {
    const created = await this.inner.put(sha256, bytes, opts);
    if (this.watch?.sha256 === sha256) await this.watch.afterPut(created);
    return created;
  }
  async stage(sha256: string, bytes: Buffer, opts?: PutOptions): Promise<StagedBlob> {
    const staged = await this.inner.stage(sha256, bytes, opts);
    return {
      commit: async () => {
        const created = await staged.commit();
        if (this.watch?.sha256 === sha256) await this.watch.afterPut(created);
        return created;
      },
      discard: () => staged.discard(),
    };
  }
  get(sha256: string) {
    return this.inner.get(sha256);
  }
  has(sha256: string) {
    return this.inner.has(sha256);
  }
  delete(sha256: string) {
    return this.inner.delete(sha256);
  }
  list() {
    return this.inner.list();
  }
}

let p: Pipeline;
let store: OrderedStore;
beforeAll(async () => {
  const { testConfig } = await import('../harness/env.ts');
  store = new OrderedStore(new FsBlobStore(testConfig().BLOB_DIR));
  p = await startPipeline({ deps: { blobs: store } });
}, 120_000);
afterAll(async () => {
  await p?.close();
});

async function freshJpeg(seed: number): Promise<Buffer> {
  return sharp({ create: { width: 64, height: 48, channels: 3, background: { r: (seed * 31) % 256, g: (seed * 17) % 256, b: (seed * 5 + 99) % 256 } } })
    .jpeg()
    .toBuffer();
}
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const send = (key: string, img: Buffer) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: img.toString('base64'), modules: ['dating'] } });
const leases = async (sha256: string) => (await p.db.query<{ n: number }>('SELECT count(*)::int AS n FROM blob_leases WHERE sha256 = $1', [sha256])).rows[0]!.n;

describe('a blob an intake found stored is not deleted under it', () => {
  it("another account's failed request (0 credits, the same photo) does not take a paying request's image", async () => {
    const attacker = await createTestAccount(p.db, { community: 0 });
    const victim = await createTestAccount(p.db, { community: 10 });
    const img = await freshJpeg(1);
    const attackerStored = deferred();
    const victimFoundIt = deferred();
    const attackerAnswered = deferred();
    // The attacker stores the bytes first; the victim's intake finds them stored; only then does the
    // attacker's request fail (402) and clean up, and only after that does the victim's run read them.
    store.watch = {
      sha256: sha(img),
      async afterPut(created) {
        // A blob is named only once the lease of the request naming it holds it (the bytes are
        // written beside the lease, and named after it).
        expect(await leases(sha(img))).toBe(created ? 1 : 2);
        if (created) {
          attackerStored.resolve();
          await victimFoundIt.promise;
        } else {
          victimFoundIt.resolve();
          await attackerAnswered.promise;
        }
      },
    };
    const attack = send(attacker.liveKey, img).finally(() => attackerAnswered.resolve());
    await attackerStored.promise;
    const paid = send(victim.liveKey, img);

    const refused = await attack;
    expect(refused.statusCode, refused.body).toBe(402);
    expect(expectEnvelope(refused.json()).code).toBe('PLAN_LIMIT_EXCEEDED');
    const res = await paid;
    store.watch = null;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().usage.creditsCharged).toBe(1);
    expect(res.json().output).toHaveProperty('estimatedDate');
    expect(await store.inner.has(sha(img))).toBe(true);
    // Both requests have ended: neither holds a lease any more.
    expect(await leases(sha(img))).toBe(0);
  }, 60_000);

  it('the collector does not take an old unreferenced blob that an intake in flight found stored', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const img = await freshJpeg(2);
    // Left by an abandoned run two hours ago: nobody holds it, past the collector's grace.
    await store.inner.put(sha(img), img);
    const old = new Date(Date.now() - 2 * 3600_000);
    await utimes(store.inner.pathOf(sha(img)), old, old);
    let collected = -1;
    store.watch = {
      sha256: sha(img),
      async afterPut(created) {
        expect(created).toBe(false);
        collected = (await collectBlobs(p.db, store, { graceMs: 3600_000 })).deleted;
      },
    };
    const res = await send(user.liveKey, img);
    store.watch = null;
    expect(collected).toBe(0);
    expect(res.statusCode, res.body).toBe(200);
    expect(await store.inner.has(sha(img))).toBe(true);
    expect(await leases(sha(img))).toBe(0);
  }, 60_000);

  it('a failed request still keeps nothing it stored when nobody else holds it, and leaves no lease', async () => {
    const user = await createTestAccount(p.db, { community: 0 });
    const img = await freshJpeg(3);
    const res = await send(user.liveKey, img);
    expect(res.statusCode, res.body).toBe(402);
    expect(await store.inner.has(sha(img))).toBe(false);
    expect(await leases(sha(img))).toBe(0);
  }, 60_000);

  it('a photo refused at its header leaves no lease, though the lease is taken while the header is read', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const img = await freshJpeg(4);
    // A JPEG cut after its header: the probe refuses it before anything is stored.
    const cut = img.subarray(0, 40);
    const res = await send(user.liveKey, cut);
    expect(res.statusCode, res.body).toBe(422);
    expect(await store.inner.has(sha(cut))).toBe(false);
    expect(await leases(sha(cut))).toBe(0);
    // A batch's photo refused the same way: the batch goes on, and its holder keeps no lease on it
    // (no request-wide clean-up runs after a batch photo's refusal).
    const refused = await takeBatchPhoto({ config: p.config, db: p.db, blobs: store, fetchPolicy: PUBLIC_INTERNET }, user.userId, { base64: cut.toString('base64') }, 'test:refused-header');
    expect(refused).toMatchObject({ refused: { code: 'IMAGE_INVALID' } });
    const held = await p.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM blob_leases WHERE holder = 'test:refused-header'`);
    expect(held.rows[0]!.n).toBe(0);
  }, 60_000);

  it('a lease whose holder died holds only until it expires; the collector then takes the blob and the lease', async () => {
    const img = await freshJpeg(4);
    await store.inner.put(sha(img), img);
    const old = new Date(Date.now() - 2 * 3600_000);
    await utimes(store.inner.pathOf(sha(img)), old, old);
    await leaseBlob(p.db, { holder: 'analyze:died', sha256: sha(img), ttlMs: 3600_000 });
    await collectBlobs(p.db, store, { graceMs: 3600_000 });
    expect(await store.inner.has(sha(img))).toBe(true);
    expect(await leases(sha(img))).toBe(1);

    await p.db.query(`UPDATE blob_leases SET expires_at = now() - interval '1 second' WHERE holder = 'analyze:died'`);
    await collectBlobs(p.db, store, { graceMs: 3600_000 });
    expect(await store.inner.has(sha(img))).toBe(false);
    expect(await leases(sha(img))).toBe(0);
  });
});
