import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey } from '../../auth/keys.ts';
import { checkInvariants, grant } from '../../credits/ledger.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, INTERNAL_SECRET, type TestApp } from '../helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ withEvictionBus: true });
});
afterAll(async () => t.close());

const internal = { 'x-internal-secret': INTERNAL_SECRET };
const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: Record<string, unknown>) =>
  t.app.inject({ method, url, headers: internal, ...(payload ? { payload } : {}) });

let emails = 0;
const email = () => `dash-${process.pid}-${Date.now()}-${emails++}@example.test`;

describe('internal account endpoints: the dashboard flow', () => {
  it('create → verify e-mail → card on file → keys → first pack → usage → revoke', async () => {
    const address = email();
    const created = await call('POST', '/v1/internal/accounts', { email: address });
    expect(created.statusCode, created.body).toBe(201);
    const { userId: accountId } = created.json();
    expect(created.json()).toMatchObject({
      email: address,
      emailVerifiedAt: null,
      cardOnFileAt: null,
      packsPurchased: 0,
      firstPackBonusAvailable: true,
      credits: { tier: 'starter', community: { balance: 0, monthlyAllowance: 0, resetsInDays: 0 }, purchased: { balance: 0 }, reserved: 0 },
    });
    expect(accountId).toMatch(/^usr_/);

    const token = await call('POST', `/v1/internal/accounts/${accountId}/email-verifications`);
    expect(token.statusCode, token.body).toBe(201);
    expect(token.json().token).toMatch(/^evt_/);
    expect(Date.parse(token.json().expiresAt) - Date.now()).toBeGreaterThan(23.9 * 3600_000);
    const verified = await call('POST', '/v1/internal/email-verifications/verify', { token: token.json().token });
    expect(verified.statusCode, verified.body).toBe(200);
    expect(verified.json()).toMatchObject({ userId: accountId, granted: 1_000 });
    const reused = await call('POST', '/v1/internal/email-verifications/verify', { token: token.json().token });
    expect(reused.statusCode).toBe(400);
    expect(expectEnvelope(reused.json()).message).toMatch(/already used/);

    const card = await call('PUT', `/v1/internal/accounts/${accountId}/card-on-file`);
    expect(card.statusCode, card.body).toBe(200);
    expect(card.json()).toMatchObject({ userId: accountId, granted: 4_000 });
    expect((await call('PUT', `/v1/internal/accounts/${accountId}/card-on-file`)).json()).toMatchObject({ granted: 0, cardOnFileAt: card.json().cardOnFileAt });

    const live = await call('POST', `/v1/internal/accounts/${accountId}/keys`, { kind: 'live', name: 'laptop' });
    expect(live.statusCode, live.body).toBe(201);
    expect(live.json()).toMatchObject({ kind: 'live', prefix: 'svc_live_', name: 'laptop', revokedAt: null });
    expect(live.json().key).toMatch(/^svc_live_[0-9A-Za-z]{40}$/);
    expect(live.json().last4).toBe(live.json().key.slice(-4));
    const test = await call('POST', `/v1/internal/accounts/${accountId}/keys`, { kind: 'test' });
    expect(test.json()).toMatchObject({ kind: 'test', prefix: 'svc_test_', name: null });

    const listed = await call('GET', `/v1/internal/accounts/${accountId}/keys`);
    expect(listed.statusCode).toBe(200);
    expect(listed.json().keys.map((k: { id: string; kind: string }) => [k.id, k.kind])).toEqual([
      [live.json().id, 'live'],
      [test.json().id, 'test'],
    ]);
    const listing = JSON.stringify(listed.json());
    for (const k of [live.json().key, test.json().key]) {
      expect(listing).not.toContain(k.slice(9, -4));
      expect(listing).not.toContain(hashKey(k));
    }

    const bought = await call('POST', `/v1/internal/accounts/${accountId}/purchases`, { pack: 'pro', idempotencyKey: 'checkout-1' });
    expect(bought.statusCode, bought.body).toBe(201);
    expect(bought.json()).toMatchObject({ pack: 'pro', status: 'granted', credits: 10_000, bonusCredits: 10_000, amountCents: 10_000, currency: 'usd' });
    expect(bought.json()).not.toHaveProperty('userId');
    const replay = await call('POST', `/v1/internal/accounts/${accountId}/purchases`, { pack: 'pro', idempotencyKey: 'checkout-1' });
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toEqual(bought.json());
    const misuse = await call('POST', `/v1/internal/accounts/${accountId}/purchases`, { pack: 'starter', idempotencyKey: 'checkout-1' });
    expect(misuse.statusCode).toBe(400);

    // The user's own key sees the same balance the dashboard does.
    const usage = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(live.json().key) });
    expect(usage.statusCode).toBe(200);
    expect(usage.json()).toEqual({ tier: 'starter', community: { balance: 5_000, monthlyAllowance: 0, resetsInDays: 0 }, purchased: { balance: 20_000 }, reserved: 0 });
    const account = await call('GET', `/v1/internal/accounts/${accountId}`);
    expect(account.json()).toMatchObject({
      emailVerifiedAt: verified.json().emailVerifiedAt,
      cardOnFileAt: card.json().cardOnFileAt,
      packsPurchased: 1,
      firstPackBonusAvailable: false,
      credits: usage.json(),
    });
    const purchases = await call('GET', `/v1/internal/accounts/${accountId}/purchases`);
    expect(purchases.json().purchases).toEqual([bought.json()]);

    expect(t.keyCache.get(hashKey(live.json().key))).toBeDefined();
    const revoked = await call('DELETE', `/v1/internal/accounts/${accountId}/keys/${live.json().id}`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect(revoked.json()).toMatchObject({ keyId: live.json().id });
    expect(revoked.json().apiProcessesNotified).toBeGreaterThanOrEqual(1);
    expect(t.keyCache.get(hashKey(live.json().key))).toBeUndefined();
    const refused = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(live.json().key) });
    expect(refused.statusCode).toBe(401);
    expect(expectEnvelope(refused.json()).code).toBe('AUTH_FAILED');
    const after = await call('GET', `/v1/internal/accounts/${accountId}/keys`);
    expect(after.json().keys[0].revokedAt).toBe(revoked.json().revokedAt);
    expect((await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(test.json().key) })).statusCode).toBe(200);
    expect((await checkInvariants(t.db, accountId))[0]).toMatchObject({ ok: true });
  });

  it("a key can be revoked only through its own user; unknown users and keys are 404", async () => {
    const a = await createTestAccount(t.db);
    const b = await createTestAccount(t.db);
    const bKey = (await call('GET', `/v1/internal/accounts/${b.userId}/keys`)).json().keys[0].id;
    const cross = await call('DELETE', `/v1/internal/accounts/${a.userId}/keys/${bKey}`);
    expect(cross.statusCode).toBe(404);
    expect(expectEnvelope(cross.json()).code).toBe('NOT_FOUND');
    expect((await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(b.liveKey) })).statusCode).toBe(200);
    for (const [method, url] of [
      ['GET', '/v1/internal/accounts/usr_nobody'],
      ['GET', '/v1/internal/accounts/usr_nobody/keys'],
      ['PUT', '/v1/internal/accounts/usr_nobody/card-on-file'],
      ['POST', '/v1/internal/accounts/usr_nobody/email-verifications'],
      ['GET', '/v1/internal/accounts/usr_nobody/purchases'],
    ] as const) {
      const res = await call(method, url);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
    }
    expect((await call('POST', '/v1/internal/accounts/usr_nobody/keys', { kind: 'live' })).statusCode).toBe(404);
    expect((await call('POST', '/v1/internal/accounts/usr_nobody/purchases', { pack: 'pro', idempotencyKey: 'x' })).statusCode).toBe(404);
  });

  it('validates bodies: e-mail format and uniqueness, key kind, pack name', async () => {
    const address = email();
    expect((await call('POST', '/v1/internal/accounts', { email: address })).statusCode).toBe(201);
    const dup = await call('POST', '/v1/internal/accounts', { email: address.toUpperCase() });
    expect(dup.statusCode).toBe(400);
    expect(expectEnvelope(dup.json()).message).toMatch(/exists/);
    expect((await call('POST', '/v1/internal/accounts', { email: 'not-an-address' })).statusCode).toBe(400);
    const { userId: accountId } = await createTestAccount(t.db);
    expect((await call('POST', `/v1/internal/accounts/${accountId}/keys`, { kind: 'gold' })).statusCode).toBe(400);
    expect((await call('POST', `/v1/internal/accounts/${accountId}/purchases`, { pack: 'mega', idempotencyKey: 'k' })).statusCode).toBe(400);
    expect((await call('POST', `/v1/internal/accounts/${accountId}/purchases`, { pack: 'pro' })).statusCode).toBe(400);
  });

  it('every account endpoint requires the internal secret: none, a wrong one or a Bearer key → 401', async () => {
    const user = await createTestAccount(t.db);
    const routes: Array<[string, string]> = [
      ['POST', '/v1/internal/accounts'],
      ['GET', `/v1/internal/accounts/${user.userId}`],
      ['POST', `/v1/internal/accounts/${user.userId}/email-verifications`],
      ['POST', '/v1/internal/email-verifications/verify'],
      ['PUT', `/v1/internal/accounts/${user.userId}/card-on-file`],
      ['POST', `/v1/internal/accounts/${user.userId}/keys`],
      ['GET', `/v1/internal/accounts/${user.userId}/keys`],
      ['DELETE', `/v1/internal/accounts/${user.userId}/keys/key_x`],
      ['GET', '/v1/internal/packs'],
      ['POST', `/v1/internal/accounts/${user.userId}/purchases`],
      ['GET', `/v1/internal/accounts/${user.userId}/purchases`],
    ];
    for (const [method, url] of routes) {
      for (const headers of [{}, { 'x-internal-secret': INTERNAL_SECRET + 'x' }, bearer(user.liveKey)]) {
        const res = await t.app.inject({ method: method as 'GET', url, headers });
        expect(res.statusCode, `${method} ${url} ${JSON.stringify(headers)}`).toBe(401);
        expect(expectEnvelope(res.json()).code).toBe('AUTH_FAILED');
      }
    }
    // Nothing happened on the way: no card flag, no grant.
    expect((await call('GET', `/v1/internal/accounts/${user.userId}`)).json()).toMatchObject({ cardOnFileAt: null, credits: { community: { balance: 0 } } });
  });

  it('GET /v1/internal/packs lists the three packs with their prices', async () => {
    const res = await call('GET', '/v1/internal/packs');
    expect(res.json()).toEqual({
      packs: [
        { name: 'starter', label: 'Starter', credits: 1_000, priceCents: 1_000, currency: 'usd' },
        { name: 'pro', label: 'Pro', credits: 10_000, priceCents: 10_000, currency: 'usd' },
        { name: 'business', label: 'Business', credits: 100_000, priceCents: 100_000, currency: 'usd' },
      ],
    });
  });

  it('the endpoints are in the internal OpenAPI document under the internal secret, and not in the public one', async () => {
    const pub = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    expect(Object.keys(pub.paths).filter((p) => p.startsWith('/v1/internal'))).toEqual([]);
    const doc = (await t.app.inject({ method: 'GET', url: '/v1/internal/openapi.json', headers: { 'x-internal-secret': INTERNAL_SECRET } })).json();
    const expected: Array<[string, string]> = [
      ['/v1/internal/accounts', 'post'],
      ['/v1/internal/accounts/{userId}', 'get'],
      ['/v1/internal/accounts/{userId}/email-verifications', 'post'],
      ['/v1/internal/email-verifications/verify', 'post'],
      ['/v1/internal/accounts/{userId}/card-on-file', 'put'],
      ['/v1/internal/accounts/{userId}/keys', 'post'],
      ['/v1/internal/accounts/{userId}/keys', 'get'],
      ['/v1/internal/accounts/{userId}/keys/{keyId}', 'delete'],
      ['/v1/internal/packs', 'get'],
      ['/v1/internal/accounts/{userId}/purchases', 'post'],
      ['/v1/internal/accounts/{userId}/purchases', 'get'],
    ];
    for (const [path, method] of expected) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.security).toEqual([{ internalSecret: [] }]);
      expect(op.tags).toEqual(['accounts']);
    }
    expect(doc.components.schemas).toHaveProperty('CreditPurchase');
    expect(doc.components.schemas).toHaveProperty('ApiKeyListing');
  });
});

describe('pack purchases in production', () => {
  it('are refused without a real payment gateway: the recording one never runs there, nothing is granted', async () => {
    const prod = await buildTestApp({ config: { NODE_ENV: 'production', PAYMENTS_GATEWAY: 'none' } });
    try {
      const user = await createTestAccount(prod.db);
      const res = await prod.app.inject({
        method: 'POST',
        url: `/v1/internal/accounts/${user.userId}/purchases`,
        headers: internal,
        payload: { pack: 'starter', idempotencyKey: 'prod-1' },
      });
      expect(res.statusCode).toBe(503);
      expect(expectEnvelope(res.json()).code).toBe('SERVICE_UNAVAILABLE');
      const rows = await prod.db.query(
        `SELECT (SELECT count(*) FROM credit_purchases WHERE user_id = $1)::int AS purchases,
                (SELECT count(*) FROM recorded_payments WHERE user_id = $1)::int AS captures,
                (SELECT purchased_balance FROM credit_accounts WHERE user_id = $1) AS purchased`,
        [user.userId],
      );
      expect(rows.rows).toEqual([{ purchases: 0, captures: 0, purchased: 0 }]);
    } finally {
      await prod.close();
    }
  });
});

describe('GET /v1/usage', () => {
  it('reports the referral bonus inside the community pool when there is one', async () => {
    const user = await createTestAccount(t.db, { community: 1_000, purchased: 30 });
    await grant(t.db, { accountId: user.userId, pool: 'community', amount: 250, idempotencyKey: 'referral:usr_friend', referral: true });
    const res = await t.app.inject({ method: 'GET', url: `/v1/usage?userId=${user.userId}`, headers: internal });
    expect(res.json()).toEqual({
      tier: 'starter',
      community: { balance: 1_250, monthlyAllowance: 0, referralBonus: 250, resetsInDays: 0 },
      purchased: { balance: 30 },
      reserved: 0,
    });
  });
});
