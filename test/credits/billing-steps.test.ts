import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import { createVisionClients } from '../../vendors/index.ts';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { createTestAccount } from '../helpers/app.ts';
import { testConfig } from '../harness/env.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';

/**
 * The two billing steps of a fresh analysis, each one local activity and one transaction:
 * reserveDelta (projection read + the plan + reservation) and persistAndSettle (records + charge).
 * Temporal may run either again after it committed (a worker dying before the workflow task
 * completes re-runs its local activities): the second run must change nothing.
 */
let db: Db;
let acts: ReturnType<typeof createActivities>;
// The refusal below is expected: the SDK's warning about it is not shown.
const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
const run = <A extends unknown[], R>(fn: (...args: A) => Promise<R>, ...args: A): Promise<R> => env.run(fn, ...args) as Promise<R>;

beforeAll(() => {
  const config = testConfig();
  db = createPool(config.DATABASE_URL, { max: 3 });
  const blobs = new FsBlobStore(config.BLOB_DIR);
  // The reserve step names the worker's vendors; none is called here.
  const vision = new Map(createVisionClients(testConfig({ SIM_VENDOR_URL: 'http://127.0.0.1:9' })).clients.map((c) => [c.vendor, c]));
  acts = createActivities({ config, db, blobs, vision, metrics: createWorkerMetrics(), workCopies: createWorkCopies({ read: (sha) => blobs.get(sha), maxBytes: 1 << 20, maxPixels: config.IMAGE_MAX_PIXELS }) });
});
afterAll(async () => {
  await db.end();
});

const SHA_A = 'a'.repeat(64);
const SHA_B = 'b'.repeat(64);
const ledgerKinds = async (accountId: string) =>
  (await db.query<{ kind: string }>('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [accountId])).rows.map((r) => r.kind);

/** The photo `sha256` in the registry with a `dating` record that run `workflowId` produced (event `eventId`, 1 credit). */
async function recordDating(accountId: string, sha256: string, eventId: string, workflowId: string): Promise<void> {
  await db.query(
    `INSERT INTO photos (user_id, sha256, phash, dhash, phash_c0, phash_c1, phash_c2, phash_c3) VALUES ($1, $2, 1, 2, 0, 0, 0, 1)`,
    [accountId, sha256],
  );
  await db.query(
    `INSERT INTO lens_events (id, user_id, sha256, lens, workflow_id, output, version, co_run_hash, provider, vendor, model, credits)
     VALUES ($3, $1, $2, 'dating', $4, '{}', '1', 'x', 'p', 'openai', 'm', 1)`,
    [accountId, sha256, eventId, workflowId],
  );
  await db.query(
    `INSERT INTO lens_records (user_id, sha256, lens, event_id, output, version, co_run_hash, provider, vendor, model, produced_at)
     VALUES ($1, $2, 'dating', $3, '{}', '1', 'x', 'p', 'openai', 'm', now())`,
    [accountId, sha256, eventId],
  );
}

function image(sha256: string, lenses: string[], billed: string[]) {
  return {
    sha256,
    pHash: '8000000000000001',
    dHash: '0000000000000002',
    outputs: Object.fromEntries(lenses.map((l) => [l, { note: `${l} of ${sha256.slice(0, 4)}` }])),
    versions: Object.fromEntries(lenses.map((l) => [l, '1'])),
    billed,
    lenses,
    provider: 'openai (simulated)',
    vendor: 'openai',
    model: 'gpt-4.1-mini',
  };
}

describe('one-step billing activities', () => {
  it('reserveDelta reserves exactly the delta once, however often it runs; persistAndSettle charges once', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 10 });
    const workflowId = `analyze:${accountId}:req-one-step`;
    const reservationId = `res:${workflowId}`;
    const delta = {
      reservationId,
      userId: accountId,
      workflowId,
      ttlMs: 600_000,
      // The same photo twice: analyzed and billed once.
      sha256s: [SHA_A, SHA_B, SHA_A],
      lenses: ['dating', 'describe', 'moderation'],
      billable: ['dating', 'describe'],
      refresh: false,
      extraCredits: 0,
    };

    const first = await run(acts.reserveDelta, delta);
    const all = ['dating', 'describe', 'moderation'];
    expect(first).toEqual({
      plans: [
        { ran: all, billed: ['dating', 'describe'], first: true, source: 0 },
        { ran: all, billed: ['dating', 'describe'], first: true, source: 1 },
        { ran: [], billed: [], first: false, source: 0 },
      ],
      needed: 4,
      // The worker's vendors, in VENDOR_ORDER: the workflow's chain comes from here.
      vendors: ['openai', 'anthropic', 'google'],
      // VENDOR_OVERFLOW is off: a vendor out of budget is waited for, not skipped (docs/decisions.md "Vendor quotas").
      overflow: false,
    });
    const again = await run(acts.reserveDelta, delta);
    expect(again).toEqual(first);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 6, reserved: 4 });

    // B already carried `dating` when persisting (a concurrent request recorded it): 3 charged, 1 back.
    const persist = {
      workflowId,
      requestId: 'req-one-step',
      userId: accountId,
      refresh: false,
      images: [image(SHA_A, ['dating', 'describe', 'moderation'], ['dating', 'describe']), image(SHA_B, ['dating', 'describe', 'moderation'], ['dating', 'describe'])],
      settle: { reservationId, extraCharge: 0 },
    };
    await recordDating(accountId, SHA_B, 'evt_concurrent', 'analyze:other');
    const persisted = await run(acts.persistAndSettle, persist);
    expect(persisted).toEqual({ applied: true, charged: 3, chargedPerImage: [2, 1] });
    const repeat = await run(acts.persistAndSettle, persist);
    expect(repeat).toEqual({ applied: false, charged: 3, chargedPerImage: [2, 1] });

    expect(await getBalance(db, accountId)).toMatchObject({ community: 7, reserved: 0 });
    expect(await ledgerKinds(accountId)).toEqual(['grant', 'reserve', 'settle']);
    expect((await checkInvariants(db, accountId))[0]!.ok).toBe(true);
  });

  it('a fully cached request reserves nothing; short of credits is PLAN_LIMIT_EXCEEDED with nothing held', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 1 });
    const base = { userId: accountId, ttlMs: 600_000, sha256s: [SHA_A], billable: ['dating', 'describe'], refresh: false, extraCredits: 0 };
    await recordDating(accountId, SHA_A, `evt_${accountId}`, 'analyze:earlier');

    const cached = await run(acts.reserveDelta, { ...base, reservationId: `res:c-${accountId}`, workflowId: `c-${accountId}`, lenses: ['dating', 'moderation'] });
    expect(cached).toEqual({ plans: [{ ran: ['moderation'], billed: [], first: true, source: 0 }], needed: 0, vendors: ['openai', 'anthropic', 'google'], overflow: false });

    // describe (1) + an extraction (5) against a balance of 1.
    const short = run(acts.reserveDelta, { ...base, reservationId: `res:s-${accountId}`, workflowId: `s-${accountId}`, lenses: ['dating', 'describe'], extraCredits: 5 });
    await expect(short).rejects.toMatchObject({ type: 'PLAN_LIMIT_EXCEEDED', nonRetryable: true });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1, reserved: 0 });
    expect(await ledgerKinds(accountId)).toEqual(['grant']);
  });
});
