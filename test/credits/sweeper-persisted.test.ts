import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance, reserve, sweepExpired } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { createTestAccount } from '../helpers/app.ts';
import { testConfig } from '../harness/env.ts';

/**
 * A workflow can hit its execution timeout (or be terminated) after it persisted its analysis and
 * before it settled: found by the chaos suite, 4 of 2,000 calls. Releasing that reservation handed
 * the caller lens records they never paid for (every later request for them is a free cache hit).
 * The sweeper charges what the run recorded instead; a run that persisted nothing is released.
 */
let db: Db;
beforeAll(() => {
  db = createPool(testConfig().DATABASE_URL, { max: 3 });
});
afterAll(async () => {
  await db.end();
});

/** A reservation of `amount` for `workflowId`, already past its expiry. */
async function expiredReservation(accountId: string, workflowId: string, amount: number): Promise<string> {
  const id = `res:${workflowId}`;
  await reserve(db, { id, accountId, amount, ttlMs: 600_000, workflowId });
  await db.query(`UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
  return id;
}

const state = async (id: string) =>
  (await db.query<{ status: string; settled_amount: number | null; reason: string }>('SELECT status, settled_amount, reason FROM reservations WHERE id = $1', [id])).rows[0];

describe('the sweeper and a workflow that ended between persisting and settling', () => {
  it('analyze: charges the lens credits the run persisted (not the extraction it never delivered)', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 20 });
    const workflowId = `analyze:${accountId}:req-persisted`;
    // 3 lenses + a 5-credit extraction reserved; the run persisted 3 new billable lenses.
    const id = await expiredReservation(accountId, workflowId, 8);
    await db.query(`INSERT INTO analysis_runs (workflow_id, user_id, request_id, image_count, credits) VALUES ($1, $2, 'req-persisted', 1, 3)`, [workflowId, accountId]);
    await sweepExpired(db);
    // (Another file's worker may sweep it first: the outcome is the same.)
    expect(await state(id)).toEqual({ status: 'settled', settled_amount: 3, reason: 'expired: charged what the run persisted' });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 17, reserved: 0 });
    expect((await checkInvariants(db, accountId))[0]!.ok).toBe(true);
  });

  it('vehicle report: charges the report the run saved', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 5 });
    const workflowId = `vehicle:${accountId}:req-report`;
    const id = await expiredReservation(accountId, workflowId, 1);
    await db.query(`INSERT INTO analysis_runs (workflow_id, user_id, request_id, image_count, credits) VALUES ($1, $2, 'req-report', 2, 0)`, [workflowId, accountId]);
    await db.query(
      `INSERT INTO vehicle_reports (id, user_id, set_hash, workflow_id, photo_sha256s, output, version, provider, vendor, model, credits)
       VALUES ($1, $2, $3, $4, '{}', '{}', '1', 'openai (simulated)', 'openai', 'm', 1)`,
      [`vrp_${accountId}`, accountId, 'a'.repeat(64), workflowId],
    );
    await sweepExpired(db);
    expect(await state(id)).toMatchObject({ status: 'settled', settled_amount: 1 });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 4, reserved: 0 });
  });

  it('a run that persisted nothing billable, or nothing at all, is released', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 10 });
    const nothing = await expiredReservation(accountId, `analyze:${accountId}:req-nothing`, 2);
    const known = await expiredReservation(accountId, `analyze:${accountId}:req-known`, 3);
    await db.query(`INSERT INTO analysis_runs (workflow_id, user_id, request_id, image_count, credits) VALUES ($1, $2, 'req-known', 1, 0)`, [`analyze:${accountId}:req-known`, accountId]);
    await sweepExpired(db);
    expect(await state(nothing)).toEqual({ status: 'released', settled_amount: null, reason: 'expired' });
    expect(await state(known)).toEqual({ status: 'released', settled_amount: null, reason: 'expired' });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 10, reserved: 0 });
    expect((await checkInvariants(db, accountId))[0]!.ok).toBe(true);
  });
});
