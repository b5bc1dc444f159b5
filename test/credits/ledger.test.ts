import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../core/errors.ts';
import { checkInvariants, getBalance, grant, release, reserve, settle, sweepExpired } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount } from '../helpers/app.ts';

let db: Db;
beforeAll(() => {
  db = createPool(testConfig().DATABASE_URL, { max: 20 });
});
afterAll(async () => db.end());

describe('credit ledger', () => {
  it('grants are idempotent by key', async () => {
    const { userId: accountId } = await createTestAccount(db);
    expect(await grant(db, { accountId, pool: 'community', amount: 1000, idempotencyKey: 'signup:verify' })).toBe(true);
    expect(await grant(db, { accountId, pool: 'community', amount: 1000, idempotencyKey: 'signup:verify' })).toBe(false);
    expect((await getBalance(db, accountId)).community).toBe(1000);
  });

  it('reserve takes community first, settle charges once and refunds the rest, release is then a no-op', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 5, purchased: 10 });
    const r = await reserve(db, { id: `r1-${accountId}`, accountId, amount: 8, ttlMs: 60_000 });
    expect([r.fromCommunity, r.fromPurchased]).toEqual([5, 3]);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 0, purchased: 7, reserved: 8 });
    expect((await settle(db, { id: r.id, charge: 6 })).applied).toBe(true);
    // 2 refunded, to the purchased pool first (it was spent last).
    expect(await getBalance(db, accountId)).toMatchObject({ community: 0, purchased: 9, reserved: 0 });
    expect((await settle(db, { id: r.id, charge: 6 })).applied).toBe(false);
    expect((await release(db, { id: r.id, reason: 'late' })).applied).toBe(false);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 0, purchased: 9, reserved: 0 });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('a reservation id reserves once, however often it is retried', async () => {
    // Retries racing each other: the ones that waited for the account lock read the reservation
    // with a snapshot from before the winner committed (this once raised a duplicate-key error).
    const { userId: accountId } = await createTestAccount(db, { community: 100 });
    for (let round = 0; round < 10; round++) {
      const got = await Promise.all(Array.from({ length: 6 }, () => reserve(db, { id: `same-${round}-${accountId}`, accountId, amount: 4, ttlMs: 60_000 })));
      expect(new Set(got.map((r) => r.id))).toEqual(new Set([`same-${round}-${accountId}`]));
    }
    expect(await getBalance(db, accountId)).toMatchObject({ community: 60, reserved: 40 });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('short of credits → PLAN_LIMIT_EXCEEDED with the shortfall, nothing moves', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 2, purchased: 1 });
    const err = await reserve(db, { id: `big-${accountId}`, accountId, amount: 4, ttlMs: 60_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).details).toEqual({ credits: { needed: 4, community: 2, purchased: 1, total: 3, resetsInDays: 0 } });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 2, purchased: 1, reserved: 0 });
  });

  it('concurrent reservations never overspend: 40 × 1 credit against 25 → exactly 25 succeed', async () => {
    const { userId: accountId } = await createTestAccount(db, { purchased: 25 });
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => reserve(db, { id: `c${i}-${accountId}`, accountId, amount: 1, ttlMs: 60_000 })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(25);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 0, reserved: 25 });
    expect((await checkInvariants(db, accountId))[0]!.ok).toBe(true);
  });

  it('settle and release racing on one reservation close it exactly once', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 10 });
    const r = await reserve(db, { id: `race-${accountId}`, accountId, amount: 10, ttlMs: 60_000 });
    const outcomes = await Promise.all([
      settle(db, { id: r.id, charge: 10 }),
      release(db, { id: r.id, reason: 'compensation' }),
      settle(db, { id: r.id, charge: 10 }),
      release(db, { id: r.id, reason: 'sweeper' }),
    ]);
    expect(outcomes.filter((o) => o.applied)).toHaveLength(1);
    const b = await getBalance(db, accountId);
    expect(b.reserved).toBe(0);
    expect([0, 10]).toContain(b.community);
    const closes = await db.query(`SELECT count(*)::int AS n FROM credit_ledger WHERE reservation_id = $1 AND kind IN ('settle','release')`, [r.id]);
    expect(closes.rows[0].n).toBe(1);
    expect((await checkInvariants(db, accountId))[0]!.ok).toBe(true);
  });

  it('the sweeper releases expired open reservations only', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 10 });
    await reserve(db, { id: `old-${accountId}`, accountId, amount: 3, ttlMs: 1 });
    await reserve(db, { id: `new-${accountId}`, accountId, amount: 2, ttlMs: 600_000 });
    await db.query(`UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1`, [`old-${accountId}`]);
    const swept = await sweepExpired(db);
    expect(swept.ids).toContain(`old-${accountId}`);
    expect(swept.ids).not.toContain(`new-${accountId}`);
    expect(swept.ids.filter((id) => id.endsWith(accountId))).toHaveLength(1);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 8, reserved: 2 });
  });

  it('the ledger refuses updates and deletes', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 7 });
    await expect(db.query('UPDATE credit_ledger SET community_delta = 1000 WHERE user_id = $1', [accountId])).rejects.toThrow(/append-only/);
    await expect(db.query('DELETE FROM credit_ledger WHERE user_id = $1', [accountId])).rejects.toThrow(/append-only/);
    const rows = await db.query('SELECT community_delta FROM credit_ledger WHERE user_id = $1', [accountId]);
    expect(rows.rows).toEqual([{ community_delta: 7 }]);
  });

  it('the database itself refuses a negative balance', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 1 });
    await expect(db.query('UPDATE credit_accounts SET community_balance = -1, community_granted = community_granted - 2 WHERE user_id = $1', [accountId])).rejects.toThrow(/check/i);
  });
});
