import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configuredPaymentGateway } from '../../payments/configured.ts';
import { testConfig } from '../harness/env.ts';
import { buildTestApp, createTestAccount, type TestApp } from '../helpers/app.ts';
import { getBalance } from '../../credits/ledger.ts';

/** Which gateway sells is configuration, one rule for the API and the console (payments/configured.ts). */
describe('the configured payment gateway', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t?.close());

  it('is Stripe when its key is set (whatever PAYMENTS_GATEWAY names), else the recording gateway only when named, else none', () => {
    const stripe = { STRIPE_SECRET_KEY: 'sk_test_123', STRIPE_WEBHOOK_SECRET: 'whsec_test_x', STRIPE_API_URL: 'http://127.0.0.1:1' };
    expect(configuredPaymentGateway(testConfig(stripe), t.db)?.name).toBe('stripe');
    expect(configuredPaymentGateway(testConfig({ ...stripe, PAYMENTS_GATEWAY: 'none' }), t.db)?.name).toBe('stripe');
    expect(configuredPaymentGateway(testConfig({ PAYMENTS_GATEWAY: 'recording' }), t.db)?.name).toBe('recording');
    expect(configuredPaymentGateway(testConfig({ PAYMENTS_GATEWAY: 'none' }), t.db)).toBeNull();
  });

  it('the recording gateway sends no webhooks, so the API takes none: a posted event is 404 and credits nothing', async () => {
    const user = await createTestAccount(t.db);
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/payments/webhook',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ type: 'checkout.session.completed', data: { object: { client_reference_id: 'pur_x', payment_status: 'paid', amount_total: 1000 } } }),
    });
    expect(res.statusCode).toBe(404);
    expect(await getBalance(t.db, user.userId)).toMatchObject({ purchased: 0, community: 0 });
  });
});
