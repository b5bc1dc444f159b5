import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setCardOnFile } from '../../accounts/card-on-file.ts';
import { createEmailVerification, verifyEmail } from '../../accounts/email-verification.ts';
import { checkInvariants, getBalance, release, reserve, settle } from '../../credits/ledger.ts';
import { purchasePack } from '../../payments/purchase.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { RecordingPaymentGateway } from '../../payments/recording-gateway.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount } from '../helpers/app.ts';

let db: Db;
beforeAll(() => {
  db = createPool(testConfig().DATABASE_URL, { max: 10 });
});
afterAll(async () => db.end());

const hold = (accountId: string, id: string, amount: number) => reserve(db, { id: `${id}-${accountId}`, accountId, amount, ttlMs: 60_000 });

describe('spend order across pools', () => {
  it('signup credits (community) are spent before a purchased pack; a partial settle refunds the purchased pool first', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const { token } = await createEmailVerification(db, { accountId });
    await verifyEmail(db, { token });
    await setCardOnFile(db, { accountId });
    await purchasePack({ db, payments: new RecordingPaymentGateway(db) }, { accountId, pack: 'starter', idempotencyKey: 'p1' });
    expect(await getBalance(db, accountId)).toEqual({ community: 5_000, purchased: 2_000, reserved: 0, referralBonus: 0 });

    const small = await hold(accountId, 'small', 4_000);
    expect([small.fromCommunity, small.fromPurchased]).toEqual([4_000, 0]);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1_000, purchased: 2_000, reserved: 4_000 });

    const spill = await hold(accountId, 'spill', 1_500);
    expect([spill.fromCommunity, spill.fromPurchased]).toEqual([1_000, 500]);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 0, purchased: 1_500, reserved: 5_500 });

    // 1,500 held, 1,200 charged: the 300 refund fits in what came from purchased, so it all goes there.
    await settle(db, { id: spill.id, charge: 1_200 });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 0, purchased: 1_800, reserved: 4_000 });

    // Nothing of `small` came from purchased: its refund goes back to community.
    await settle(db, { id: small.id, charge: 3_000 });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1_000, purchased: 1_800, reserved: 0 });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('a refund larger than what came from purchased splits: purchased back in full, the rest to community', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 100, purchased: 50 });
    const r = await hold(accountId, 'split', 120);
    expect([r.fromCommunity, r.fromPurchased]).toEqual([100, 20]);
    await settle(db, { id: r.id, charge: 90 });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 10, purchased: 50, reserved: 0 });
    const rows = await db.query(`SELECT community_delta, purchased_delta, charged_delta FROM credit_ledger WHERE reservation_id = $1 AND kind = 'settle'`, [r.id]);
    expect(rows.rows).toEqual([{ community_delta: 10, purchased_delta: 20, charged_delta: 90 }]);
  });

  it('purchased credits are touched only once community is empty, and a release returns each credit to its pool', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 3, purchased: 10 });
    const a = await hold(accountId, 'a', 2);
    expect([a.fromCommunity, a.fromPurchased]).toEqual([2, 0]);
    const b = await hold(accountId, 'b', 4);
    expect([b.fromCommunity, b.fromPurchased]).toEqual([1, 3]);
    const c = await hold(accountId, 'c', 5);
    expect([c.fromCommunity, c.fromPurchased]).toEqual([0, 5]);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 0, purchased: 2, reserved: 11 });
    await release(db, { id: b.id, reason: 'test' });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1, purchased: 5, reserved: 7 });
    await settle(db, { id: a.id, charge: 2 });
    await settle(db, { id: c.id, charge: 5 });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1, purchased: 5, reserved: 0 });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });
});
