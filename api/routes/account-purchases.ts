import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError } from '../../core/errors.ts';
import { webUrl } from '../../core/config.ts';
import { listPurchases, type Purchase } from '../../credits/packs.ts';
import { PACKS } from '../../credits/price-book.ts';
import { purchasePack } from '../../payments/purchase.ts';
import { registerPaymentWebhook } from '../../payments/webhook.ts';
import type { AppDeps } from '../deps.ts';
import { packSchema, purchaseBody, purchaseSchema, userIdParams, internalDoc, internalRoute } from '../schemas/accounts.ts';
import { errorResponses } from '../schemas/common.ts';

const purchaseView = ({ userId: _accountId, ...p }: Purchase) => p;

/** The processor's signed events (Stripe's webhook endpoint): no key, the signature authenticates. */
export const PAYMENT_WEBHOOK = '/v1/payments/webhook';

/**
 * The pack catalog and an account's pack purchases, through the one purchase path and the gateway the
 * composition root chose (deps.payments, payments/configured.ts); with none, purchases are refused
 * rather than hand out credits nobody paid for. With a hosted gateway (Stripe Checkout) the
 * purchase answers pending with the `checkoutUrl` to send the buyer to, and the processor's event
 * at PAYMENT_WEBHOOK grants it, through the console's webhook handler.
 */
export function accountPurchaseRoutes(deps: AppDeps): FastifyPluginAsync {
  const payments = deps.payments ?? null;
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();

    r.get(
      '/v1/internal/packs',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'listPacks',
          summary: 'Credit packs',
          description: '0.01 USD per credit. The first pack a user buys ships with 2× the credits at the same price.',
          response: { 200: z.object({ packs: z.array(packSchema) }), ...errorResponses(401) },
        },
      },
      async () => ({ packs: Object.values(PACKS).map((p) => ({ ...p, currency: 'usd' as const })) }),
    );

    r.post(
      '/v1/internal/accounts/:userId/purchases',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'purchasePack',
          summary: 'Buy a credit pack',
          description:
            'Captures the price, then grants the credits to the purchased pool (2× on the first pack), once per `idempotencyKey`: a retry answers the same purchase (200) without capturing or granting again. A declined payment answers `status: "failed"` and grants nothing; a payment fault answers 500 and leaves the purchase `pending` for a retry with the same key. With a hosted payment page (Stripe Checkout) the purchase answers `pending` with the `checkoutUrl` to send the buyer to; the processor\'s signed event grants it.',
          params: userIdParams,
          body: purchaseBody,
          response: { 200: purchaseSchema, 201: purchaseSchema, ...errorResponses(400, 401, 404, 503) },
        },
      },
      async (request, reply) => {
        if (!payments) throw new AppError('SERVICE_UNAVAILABLE', 'Pack purchases are unavailable: no payment gateway is configured (PAYMENTS_GATEWAY)');
        const consoleUrl = webUrl(deps.config);
        const { purchase, created, checkoutUrl } = await purchasePack(
          { db: deps.db, payments },
          {
            accountId: request.params.userId,
            pack: request.body.pack,
            idempotencyKey: request.body.idempotencyKey,
            returnTo: { success: (purchaseId) => `${consoleUrl}/?purchase=${purchaseId}`, cancel: `${consoleUrl}/?purchase=cancelled` },
          },
        );
        return reply.code(created ? 201 : 200).send({ ...purchaseView(purchase), ...(checkoutUrl ? { checkoutUrl } : {}) });
      },
    );

    r.get(
      '/v1/internal/accounts/:userId/purchases',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'listPurchases',
          summary: "A user's pack purchases",
          params: userIdParams,
          response: { 200: z.object({ purchases: z.array(purchaseSchema) }), ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => ({ purchases: (await listPurchases(deps.db, request.params.userId)).map(purchaseView) }),
    );

    // The same webhook handler as the console's (payments/webhook.ts); not part of the API's
    // documents: the processor, not a client, calls it.
    await registerPaymentWebhook(app, PAYMENT_WEBHOOK, { db: deps.db, payments }, { schema: { hide: true }, config: { auth: 'none' } });
  };
}
