import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { startStripeMock, type StripeMock } from '../../tools/scripts/stripe-mock.ts';
import { testConfig } from '../harness/env.ts';
import { INTERNAL_SECRET } from '../helpers/app.ts';
import { apiUrl, killAll, serviceEnv, spawnService, stopGracefully, type ServiceProcess } from '../helpers/processes.ts';

/**
 * The API's pack purchase on the wire (issue 28 item 9): a real API process (`api/server.ts`)
 * configured with Stripe pointed at Stripe's own API mock, a purchase through HTTP, Stripe's
 * event (signed with the test webhook secret, as Stripe signs) through HTTP, and the balance read
 * back through HTTP. The same purchase path and webhook handler as the console's
 * (payments/purchase.ts, payments/webhook.ts).
 */
const WEBHOOK_SECRET = 'whsec_test_api_0123456789abcdef';
const config = testConfig({ INTERNAL_SECRET });
let stripeMock: StripeMock;
let api: ServiceProcess;
let url: string;
let db: Db;

beforeAll(async () => {
  stripeMock = await startStripeMock();
  db = createPool(config.DATABASE_URL, { max: 2 });
  // PAYMENTS_GATEWAY=recording as well: a configured Stripe is what sells, whatever else is named.
  api = spawnService(
    'api/server.ts',
    serviceEnv(config, { STRIPE_SECRET_KEY: 'sk_test_123', STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_URL: stripeMock.url, PAYMENTS_GATEWAY: 'recording', WEB_URL: 'https://console.example' }),
  );
  url = await apiUrl(api);
}, 120_000);

afterAll(async () => {
  if (api) await stopGracefully(api.child);
  killAll();
  await stripeMock?.stop();
  await db?.end();
});

const internal = { 'x-internal-secret': INTERNAL_SECRET, 'content-type': 'application/json' };
let n = 0;

async function newAccount(): Promise<string> {
  const r = await fetch(`${url}/v1/internal/accounts`, { method: 'POST', headers: internal, body: JSON.stringify({ email: `stripe-wire-${process.pid}-${Date.now()}-${n++}@example.test` }) });
  expect(r.status).toBe(201);
  return ((await r.json()) as { userId: string }).userId;
}

interface PurchaseView {
  purchaseId: string;
  pack: string;
  status: string;
  credits: number;
  bonusCredits: number;
  amountCents: number;
  paymentId: string | null;
  failure: string | null;
  checkoutUrl?: string;
}

async function buy(accountId: string, pack: string, idempotencyKey: string): Promise<{ status: number; body: PurchaseView }> {
  const r = await fetch(`${url}/v1/internal/accounts/${accountId}/purchases`, { method: 'POST', headers: internal, body: JSON.stringify({ pack, idempotencyKey }) });
  return { status: r.status, body: (await r.json()) as PurchaseView };
}

async function purchased(accountId: string): Promise<number> {
  const r = await fetch(`${url}/v1/internal/accounts/${accountId}`, { headers: { 'x-internal-secret': INTERNAL_SECRET } });
  expect(r.status).toBe(200);
  return ((await r.json()) as { credits: { purchased: { balance: number } } }).credits.purchased.balance;
}

async function purchasesOf(accountId: string): Promise<PurchaseView[]> {
  const r = await fetch(`${url}/v1/internal/accounts/${accountId}/purchases`, { headers: { 'x-internal-secret': INTERNAL_SECRET } });
  return ((await r.json()) as { purchases: PurchaseView[] }).purchases;
}

// Stripe's SDK signs the test events the way Stripe signs its deliveries.
const signer = new Stripe('sk_test_123');
function webhook(event: unknown, opts: { secret?: string; unsigned?: boolean } = {}): Promise<Response> {
  const payload = JSON.stringify(event);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (!opts.unsigned) headers['stripe-signature'] = signer.webhooks.generateTestHeaderString({ payload, secret: opts.secret ?? WEBHOOK_SECRET });
  return fetch(`${url}/v1/payments/webhook`, { method: 'POST', headers, body: payload });
}
const completed = (purchaseId: string, amount: number, opts: { id?: string; userId?: string } = {}) => ({
  id: opts.id ?? `evt_${purchaseId}`,
  object: 'event',
  type: 'checkout.session.completed',
  data: {
    object: {
      id: `cs_test_${purchaseId}`,
      object: 'checkout.session',
      client_reference_id: purchaseId,
      payment_status: 'paid',
      amount_total: amount,
      payment_intent: `pi_${purchaseId}`,
      ...(opts.userId ? { metadata: { userId: opts.userId } } : {}),
    },
  },
});

describe("the API's pack purchase through Stripe, on the wire", () => {
  it('answers pending with a Checkout URL, grants on the signed webhook (first pack 2×), once however often it arrives; forged or unsigned grants nothing', async () => {
    const accountId = await newAccount();
    const first = await buy(accountId, 'starter', 'wire-1');
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ pack: 'starter', status: 'pending', amountCents: 1_000, paymentId: null });
    expect(first.body.checkoutUrl).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    const purchaseId = first.body.purchaseId;
    // The same key again is the same purchase, still pending, never a second one.
    const again = await buy(accountId, 'starter', 'wire-1');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ purchaseId, status: 'pending' });
    expect(await purchased(accountId)).toBe(0);

    // Not signed with our secret, or not signed at all: 400, nothing granted.
    const forged = await webhook(completed(purchaseId, 1_000), { secret: 'whsec_forged' });
    expect(forged.status).toBe(400);
    expect(((await forged.json()) as { error: { code: string } }).error.code).toBe('VALIDATION_FAILED');
    expect((await webhook(completed(purchaseId, 1_000), { unsigned: true })).status).toBe(400);
    expect(await purchased(accountId)).toBe(0);
    expect((await purchasesOf(accountId)).map((p) => p.status)).toEqual(['pending']);

    // Stripe delivers at least once: the same event three times, two of them at once.
    const deliveries = await Promise.all([webhook(completed(purchaseId, 1_000)), webhook(completed(purchaseId, 1_000))]);
    expect(deliveries.map((r) => r.status)).toEqual([200, 200]);
    expect(await deliveries[0]!.json()).toEqual({ received: true });
    expect((await webhook(completed(purchaseId, 1_000))).status).toBe(200);
    expect(await purchased(accountId)).toBe(2_000);
    expect(await purchasesOf(accountId)).toEqual([
      expect.objectContaining({ purchaseId, status: 'granted', credits: 1_000, bonusCredits: 1_000, paymentId: `pi_${purchaseId}` }),
    ]);
    // The purchase, asked for again, stands as granted: no new Checkout page.
    const after = await buy(accountId, 'starter', 'wire-1');
    expect(after.body).toMatchObject({ purchaseId, status: 'granted' });
    expect(after.body.checkoutUrl).toBeUndefined();
    expect(await checkInvariants(db, accountId)).toEqual([{ userId: accountId, ok: true, problems: [] }]);
  });

  it("an event naming another account's purchase credits nobody; each account's own purchase credits only it", async () => {
    const a = await newAccount();
    const b = await newAccount();
    const ofA = await buy(a, 'pro', 'same-key');
    const ofB = await buy(b, 'pro', 'same-key');
    // One key, two accounts: two purchases.
    expect(ofB.body.purchaseId).not.toBe(ofA.body.purchaseId);
    expect((await purchasesOf(b)).map((p) => p.purchaseId)).toEqual([ofB.body.purchaseId]);

    // Paid for B (the session's account), naming A's purchase: neither is credited, A's stays pending.
    expect((await webhook(completed(ofA.body.purchaseId, 10_000, { id: 'evt_cross', userId: b }))).status).toBe(200);
    expect([await purchased(a), await purchased(b)]).toEqual([0, 0]);
    expect((await purchasesOf(a)).map((p) => p.status)).toEqual(['pending']);

    // B's own purchase, paid: B alone is credited.
    expect((await webhook(completed(ofB.body.purchaseId, 10_000, { userId: b }))).status).toBe(200);
    expect([await purchased(a), await purchased(b)]).toEqual([0, 20_000]);
    // A paid amount other than the pack's price fails A's purchase and credits nothing.
    expect((await webhook(completed(ofA.body.purchaseId, 100, { userId: a }))).status).toBe(200);
    expect(await purchasesOf(a)).toEqual([expect.objectContaining({ status: 'failed', failure: 'paid 100 cents, the pack costs 10000' })]);
    expect([await purchased(a), await purchased(b)]).toEqual([0, 20_000]);
    expect(await checkInvariants(db, a)).toEqual([{ userId: a, ok: true, problems: [] }]);
    expect(await checkInvariants(db, b)).toEqual([{ userId: b, ok: true, problems: [] }]);
  });
});
