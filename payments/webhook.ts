import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, RouteShorthandOptions } from 'fastify';
import { recordCardOnFile } from '../accounts/card-on-file.ts';
import { validationFailed } from '../core/errors.ts';
import { fulfilPaidPurchase } from '../credits/packs.ts';
import type { Db } from '../db/pool.ts';
import { WebhookSignatureError, type PaymentGateway } from './gateway.ts';

/**
 * The one webhook handler, the API's and the console's: the gateway checks the delivery's
 * signature (a forged or unsigned one is 400 and moves nothing) and says what it means; the grant
 * is keyed by what it pays for, so an event delivered twice, or twice at once, credits once:
 * - a paid pack: the pending purchase is granted, only when the amount paid is the price recorded
 *   on it and the event names no other account (credits/packs.ts `fulfilPaidPurchase`);
 * - a card stored: the card-on-file credits, once per workspace and once per card
 *   (accounts/card-on-file.ts `recordCardOnFile`);
 * - anything else is acknowledged (the processor retries only what we refuse).
 */
export async function handlePaymentWebhook(
  deps: { db: Db; payments: PaymentGateway & Required<Pick<PaymentGateway, 'readWebhook'>> },
  delivery: { body: string; headers: IncomingHttpHeaders },
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>,
): Promise<{ received: true }> {
  let event;
  try {
    event = await deps.payments.readWebhook(delivery.body, delivery.headers);
  } catch (err) {
    if (err instanceof WebhookSignatureError) throw validationFailed(err.message);
    throw err;
  }
  if (event.type === 'pack-paid') {
    const result = await fulfilPaidPurchase(deps.db, event);
    const fine = result.outcome === 'granted' || result.outcome === 'already-granted';
    log[fine ? 'info' : 'warn']({ event: event.eventId, purchaseId: event.purchaseId, outcome: result.outcome }, `${deps.payments.name} payment event`);
  } else if (event.type === 'card-stored') {
    const result = await recordCardOnFile(deps.db, { accountId: event.workspaceId, fingerprint: event.fingerprint });
    log.info({ event: event.eventId, workspaceId: event.workspaceId, outcome: result.outcome, granted: result.granted }, 'card on file');
  } else {
    log.info({ event: event.eventId, reason: event.reason }, `${deps.payments.name} event not acted on`);
  }
  return { received: true };
}

/**
 * Mount the handler at `path` on a fastify app, when the gateway sends webhooks: in a scope of its
 * own whose JSON bodies stay the raw text the signature covers. `options` carries what the app
 * needs to know of the route (the API: no key, not in the OpenAPI document).
 */
export async function registerPaymentWebhook(
  app: FastifyInstance,
  path: string,
  deps: { db: Db; payments: PaymentGateway | null },
  options: RouteShorthandOptions = {},
): Promise<void> {
  const payments = deps.payments;
  if (!payments?.readWebhook) return;
  const gateway = payments as PaymentGateway & Required<Pick<PaymentGateway, 'readWebhook'>>;
  await app.register(async (scope) => {
    // Text, not a Buffer: one string is what the API's text guard checks cheaply (a signature over
    // bytes that are not UTF-8 cannot survive the decoding, and is refused like any forgery).
    scope.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: 1024 * 1024 }, (_req, body, done) => done(null, body));
    scope.post(path, options, async (request, reply) => {
      const body = typeof request.body === 'string' ? request.body : '';
      return reply.send(await handlePaymentWebhook({ db: deps.db, payments: gateway }, { body, headers: request.headers }, request.log));
    });
  });
}
