import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../core/errors.ts';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { FIRST_PACK_BONUS_KEY, firstPackBonusAvailable, fulfilPaidPurchase } from '../../credits/packs.ts';
import { CENTS_PER_CREDIT, packGrant, PACKS, type PackName } from '../../credits/price-book.ts';
import { createPool, type Db } from '../../db/pool.ts';
import type { PaymentGateway, PaymentRequest } from '../../payments/gateway.ts';
import { purchasePack } from '../../payments/purchase.ts';
import { RecordingPaymentGateway } from '../../payments/recording-gateway.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount } from '../helpers/app.ts';

let db: Db;
let payments: RecordingPaymentGateway;
beforeAll(() => {
  db = createPool(testConfig().DATABASE_URL, { max: 20 });
  payments = new RecordingPaymentGateway(db);
});
afterAll(async () => db.end());

const buy = (accountId: string, pack: PackName, idempotencyKey: string, gateway: PaymentGateway = payments) =>
  purchasePack({ db, payments: gateway }, { accountId, pack, idempotencyKey });

async function captures(accountId: string): Promise<Array<{ amount_cents: number; status: string }>> {
  const r = await db.query('SELECT amount_cents, status FROM recorded_payments WHERE user_id = $1 ORDER BY created_at', [accountId]);
  return r.rows;
}

async function ledgerRows(accountId: string): Promise<Array<{ kind: string; idempotency_key: string; purchased_delta: number; community_delta: number }>> {
  const r = await db.query(
    'SELECT kind, idempotency_key, purchased_delta, community_delta FROM credit_ledger WHERE user_id = $1 ORDER BY id',
    [accountId],
  );
  return r.rows;
}

describe('credit packs: amounts and prices', () => {
  it('Starter 1,000 / Pro 10,000 / Business 100,000 credits at 0.01 USD per credit: 10, 100 and 1,000 USD', () => {
    expect(CENTS_PER_CREDIT).toBe(1);
    expect(Object.values(PACKS).map((p) => [p.name, p.label, p.credits, p.priceCents])).toEqual([
      ['starter', 'Starter', 1_000, 1_000],
      ['pro', 'Pro', 10_000, 10_000],
      ['business', 'Business', 100_000, 100_000],
    ]);
  });

  it('the first pack ships with 2× the credits at the same price; later packs with 1×', () => {
    expect(packGrant(PACKS.pro, true)).toEqual({ credits: 10_000, bonusCredits: 10_000, priceCents: 10_000 });
    expect(packGrant(PACKS.pro, false)).toEqual({ credits: 10_000, bonusCredits: 0, priceCents: 10_000 });
  });
});

describe('buying packs', () => {
  it('captures the list price and grants to the purchased pool: 2× on the first pack only', async () => {
    const { userId: accountId } = await createTestAccount(db, { community: 7 });
    expect(await firstPackBonusAvailable(db, accountId)).toBe(true);

    const first = await buy(accountId, 'starter', 'k1');
    expect(first.created).toBe(true);
    expect(first.purchase).toMatchObject({ pack: 'starter', status: 'granted', credits: 1_000, bonusCredits: 1_000, amountCents: 1_000, currency: 'usd', failure: null });
    expect(first.purchase.paymentId).toMatch(/^pay_rec_/);
    expect(await getBalance(db, accountId)).toEqual({ community: 7, purchased: 2_000, reserved: 0, referralBonus: 0 });
    expect(await firstPackBonusAvailable(db, accountId)).toBe(false);

    const second = await buy(accountId, 'pro', 'k2');
    expect(second.purchase).toMatchObject({ status: 'granted', credits: 10_000, bonusCredits: 0, amountCents: 10_000 });
    const third = await buy(accountId, 'business', 'k3');
    expect(third.purchase).toMatchObject({ status: 'granted', credits: 100_000, bonusCredits: 0, amountCents: 100_000 });

    expect(await getBalance(db, accountId)).toEqual({ community: 7, purchased: 112_000, reserved: 0, referralBonus: 0 });
    expect(await captures(accountId)).toEqual([
      { amount_cents: 1_000, status: 'captured' },
      { amount_cents: 10_000, status: 'captured' },
      { amount_cents: 100_000, status: 'captured' },
    ]);
    const ledger = await ledgerRows(accountId);
    expect(ledger.map((l) => [l.kind, l.purchased_delta])).toEqual([
      ['grant', 0], // the test user's 7 community credits
      ['purchase', 1_000],
      ['grant', 1_000],
      ['purchase', 10_000],
      ['purchase', 100_000],
    ]);
    expect(ledger[2]!.idempotency_key).toBe(FIRST_PACK_BONUS_KEY);
    expect(ledger[1]!.idempotency_key).toBe(`pack:purchase:${first.purchase.purchaseId}`);
    const acct = await db.query('SELECT packs_purchased FROM credit_accounts WHERE user_id = $1', [accountId]);
    expect(acct.rows[0].packs_purchased).toBe(3);
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('10 concurrent first purchases: all are captured and granted, exactly one carries the first-pack bonus', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => buy(accountId, 'starter', `race-${i}`)));
    expect(results.map((r) => r.purchase.status)).toEqual(Array(10).fill('granted'));
    expect(results.map((r) => r.purchase.bonusCredits).sort((a, b) => b - a)).toEqual([1_000, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 10 * 1_000 + 1_000, community: 0, reserved: 0 });
    expect(await captures(accountId)).toHaveLength(10);
    const bonusRows = (await ledgerRows(accountId)).filter((l) => l.idempotency_key === FIRST_PACK_BONUS_KEY);
    expect(bonusRows).toEqual([{ kind: 'grant', idempotency_key: FIRST_PACK_BONUS_KEY, purchased_delta: 1_000, community_delta: 0 }]);
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('the database itself refuses a second first-pack bonus', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const a = await buy(accountId, 'starter', 'a');
    const b = await buy(accountId, 'starter', 'b');
    expect([a.purchase.bonusCredits, b.purchase.bonusCredits]).toEqual([1_000, 0]);
    await expect(
      db.query(`INSERT INTO credit_ledger (user_id, kind, idempotency_key, purchased_delta) VALUES ($1, 'grant', $2, 1000)`, [accountId, FIRST_PACK_BONUS_KEY]),
    ).rejects.toThrow(/duplicate key/);
    await expect(db.query('UPDATE credit_purchases SET bonus_credits = credits WHERE id = $1', [b.purchase.purchaseId])).rejects.toThrow(
      /credit_purchases_one_first_pack_bonus/,
    );
  });

  it('a declined capture grants nothing, fails for good, and leaves the first-pack bonus for the next purchase', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const declining = new RecordingPaymentGateway(db, { decline: () => 'card_declined' });
    const failed = await buy(accountId, 'pro', 'declined', declining);
    expect(failed.purchase).toMatchObject({ status: 'failed', failure: 'card_declined', paymentId: null, bonusCredits: 0 });
    expect(await getBalance(db, accountId)).toEqual({ community: 0, purchased: 0, reserved: 0, referralBonus: 0 });
    expect(await ledgerRows(accountId)).toEqual([]);

    // The same key again, even through a gateway that would accept: the same failed purchase, no new capture.
    const retried = await buy(accountId, 'pro', 'declined');
    expect(retried).toEqual({ purchase: failed.purchase, created: false });
    expect(await captures(accountId)).toEqual([{ amount_cents: 10_000, status: 'declined' }]);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 0 });

    const next = await buy(accountId, 'pro', 'new-card');
    expect(next.purchase).toMatchObject({ status: 'granted', credits: 10_000, bonusCredits: 10_000 });
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 20_000 });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('a retried purchase (same idempotency key, 10 at once) is captured once and granted once', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const results = await Promise.all(Array.from({ length: 10 }, () => buy(accountId, 'starter', 'same-key')));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.purchase.purchaseId)).size).toBe(1);
    expect(new Set(results.map((r) => r.purchase.paymentId)).size).toBe(1);
    expect(results.every((r) => r.purchase.status === 'granted')).toBe(true);
    expect(await captures(accountId)).toEqual([{ amount_cents: 1_000, status: 'captured' }]);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 2_000 });
    const again = await buy(accountId, 'starter', 'same-key');
    expect(again).toEqual({ purchase: results[0]!.purchase, created: false });
    expect(await captures(accountId)).toHaveLength(1);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 2_000 });
    const rows = await db.query('SELECT count(*)::int AS n FROM credit_purchases WHERE user_id = $1', [accountId]);
    expect(rows.rows[0].n).toBe(1);
  });

  it('a capture whose answer was lost leaves the purchase pending; the retry finds the same payment and grants once', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const seen: PaymentRequest[] = [];
    let loseAnswer = true;
    const flaky: PaymentGateway = {
      name: 'recording',
      async startPayment(req) {
        seen.push(req);
        const out = await payments.startPayment(req);
        if (loseAnswer) throw new Error('connection reset after the capture went through');
        return out;
      },
    };
    await expect(buy(accountId, 'pro', 'flaky', flaky)).rejects.toThrow(/connection reset/);
    const pending = await db.query('SELECT status FROM credit_purchases WHERE user_id = $1', [accountId]);
    expect(pending.rows).toEqual([{ status: 'pending' }]);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 0 });

    loseAnswer = false;
    const done = await buy(accountId, 'pro', 'flaky', flaky);
    expect(done.purchase).toMatchObject({ status: 'granted', credits: 10_000, bonusCredits: 10_000 });
    expect(seen).toHaveLength(2);
    expect(seen[0]!.idempotencyKey).toBe(seen[1]!.idempotencyKey);
    expect(seen[0]).toMatchObject({ accountId, amountCents: 10_000, description: 'Lenstack Pro pack: 10,000 credits' });
    expect(await captures(accountId)).toEqual([{ amount_cents: 10_000, status: 'captured' }]);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 20_000 });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('refuses an unknown pack, an idempotency key reused for another pack, and an unknown user', async () => {
    const { userId: accountId } = await createTestAccount(db);
    await expect(purchasePack({ db, payments }, { accountId, pack: 'mega', idempotencyKey: 'x' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await buy(accountId, 'starter', 'reused');
    const err = await buy(accountId, 'business', 'reused').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('VALIDATION_FAILED');
    expect((err as AppError).message).toMatch(/already used for a starter purchase/);
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 2_000 });
    await expect(buy('usr_nobody', 'starter', 'x')).rejects.toMatchObject({ code: 'NOT_FOUND', status: 404 });
  });

  it('a hosted purchase is granted what it was recorded at, even when the price book changed before it was paid', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const hosted: PaymentGateway = { name: 'stripe', startPayment: async (req) => ({ kind: 'checkout', checkoutId: `cs_${req.purchaseId}`, url: 'https://checkout.example/x' }) };
    const { purchase, checkoutUrl } = await buy(accountId, 'starter', 'old-price', hosted);
    expect([purchase.status, checkoutUrl]).toEqual(['pending', 'https://checkout.example/x']);
    // The purchase as an older price book recorded it: 900 credits for 9 USD.
    await db.query('UPDATE credit_purchases SET credits = 900, amount_cents = 900 WHERE id = $1', [purchase.purchaseId]);
    const paid = await fulfilPaidPurchase(db, { purchaseId: purchase.purchaseId, amountCents: 900, paymentId: 'pi_old' });
    expect(paid.purchase).toMatchObject({ status: 'granted', credits: 900, bonusCredits: 900, amountCents: 900 });
    expect(await getBalance(db, accountId)).toMatchObject({ purchased: 1_800 });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });
});
