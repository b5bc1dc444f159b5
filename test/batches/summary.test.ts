import { afterAll, describe, expect, it } from 'vitest';
import { batchSummary, completeBatch, createBatch as storeBatch, finishItem, markBatchStarted, retryItem, setBatchStatus, workspaceShare } from '../../batches/repository.ts';
import { createPool } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount } from '../helpers/app.ts';

const db = createPool(testConfig().DATABASE_URL);
afterAll(() => db.end());

const ref = (n: number) => ({ sha256: n.toString(16).padStart(64, '0'), format: 'jpeg', width: 10, height: 10, pHash: '0'.repeat(16), dHash: '0'.repeat(16) });
const spec = { stack: null, lenses: ['moderation', 'dating'], billable: ['dating'] };
/** A batch as submission leaves it once its workflow started (stored `starting`, then `running`). */
async function createBatch(...args: Parameters<typeof storeBatch>): Promise<string> {
  const id = await storeBatch(...args);
  await markBatchStarted(args[0], id);
  return id;
}

describe('a batch summary', () => {
  it('estimates the time left from the pace so far, only while running with photos pending', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const id = await createBatch(db, { accountId, kind: 'photos', spec, columns: null, items: [0, 1, 2, 3, 4].map((n) => ({ source: `p${n}`, ref: ref(n) })) });
    expect((await batchSummary(db, accountId, id)).etaSeconds).toBeNull();
    // Submitted 100 s ago; two photos ran in that time: 50 s each, three left → 150 s.
    await db.query(`UPDATE batches SET created_at = now() - interval '100 seconds' WHERE id = $1`, [id]);
    await db.query(`UPDATE batch_items SET attempts = 1 WHERE batch_id = $1`, [id]);
    await finishItem(db, { batchId: id, index: 0, outcome: { credits: 1 } });
    await finishItem(db, { batchId: id, index: 1, outcome: { code: 'PROVIDER_ERROR', message: 'every vendor failed' } });
    const s = await batchSummary(db, accountId, id);
    expect(s.counts).toEqual({ total: 5, done: 1, failed: 1, pending: 3 });
    expect(s.etaSeconds).toBeGreaterThanOrEqual(149);
    expect(s.etaSeconds).toBeLessThanOrEqual(152);
    expect(s.creditsCharged).toBe(1);
    // Finishing twice changes nothing (a retried workflow step).
    await finishItem(db, { batchId: id, index: 0, outcome: { code: 'X', message: 'late' } });
    expect((await batchSummary(db, accountId, id)).counts.done).toBe(1);

    // Not completed while photos are pending; a failed photo back to pending keeps it open.
    expect(await completeBatch(db, id)).toBe(false);
    for (const i of [2, 3, 4]) await finishItem(db, { batchId: id, index: i, outcome: { credits: 1 } });
    expect(await retryItem(db, { batchId: id, index: 1 })).toBe('retried');
    expect(await completeBatch(db, id)).toBe(false);
    await finishItem(db, { batchId: id, index: 1, outcome: { credits: 1 } });
    expect(await completeBatch(db, id)).toBe(true);
    expect(await batchSummary(db, accountId, id)).toMatchObject({ status: 'completed', etaSeconds: null, creditsCharged: 5 });
    expect(await retryItem(db, { batchId: id, index: 1 })).toBe('not-failed');
  });

  it("is another account's batch: 404", async () => {
    const a = await createTestAccount(db);
    const b = await createTestAccount(db);
    const id = await createBatch(db, { accountId: a.userId, kind: 'photos', spec, columns: null, items: [{ source: 'x', ref: ref(9) }] });
    await expect(batchSummary(db, b.userId, id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it("shares the workspace's cap among its running batches, at least one photo each", async () => {
    const { userId: accountId } = await createTestAccount(db);
    expect(await workspaceShare(db, { accountId, cap: 8 })).toBe(8);
    const ids = [];
    for (let k = 0; k < 3; k++) ids.push(await createBatch(db, { accountId, kind: 'photos', spec, columns: null, items: [{ source: 'x', ref: ref(100 + k) }] }));
    expect(await workspaceShare(db, { accountId, cap: 8 })).toBe(2);
    await setBatchStatus(db, { batchId: ids[0]!, status: 'paused', pauseReason: 'credits' });
    await setBatchStatus(db, { batchId: ids[1]!, status: 'cancelled' });
    expect(await workspaceShare(db, { accountId, cap: 8 })).toBe(8);
    for (let k = 0; k < 4; k++) await createBatch(db, { accountId, kind: 'photos', spec, columns: null, items: [{ source: 'y', ref: ref(200 + k) }] });
    expect(await workspaceShare(db, { accountId, cap: 3 })).toBe(1);
    // Another workspace's batches are not counted.
    const other = await createTestAccount(db);
    expect(await workspaceShare(db, { accountId: other.userId, cap: 8 })).toBe(8);
  });
});
