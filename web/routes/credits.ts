import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { cardOnFileStatus } from '../../accounts/card-on-file.ts';
import { requireMember } from '../../accounts/workspaces.ts';
import { AppError } from '../../core/errors.ts';
import { chargedPerDay, ledgerHistory } from '../../credits/history.ts';
import { getBalance } from '../../credits/ledger.ts';
import { firstPackBonusAvailable } from '../../credits/packs.ts';
import { PACK_NAMES, PACKS, packGrant } from '../../credits/price-book.ts';
import { purchasePack } from '../../payments/purchase.ts';
import { registerPaymentWebhook } from '../../payments/webhook.ts';
import type { WebContext } from '../deps.ts';
import { parse, parseBody, workspaceParams } from '../plugins/validation.ts';

/** Stripe's events arrive here, authenticated by their signature (not by cookie or origin: web/plugins/origin-check.ts exempts it). */
export const STRIPE_WEBHOOK = '/api/v1/stripe/webhook';

const purchaseBody = z.object({ pack: z.enum(PACK_NAMES), idempotencyKey: z.string().min(8).max(100) });

/**
 * Credits and paying for them: the balance with its ledger and daily charges, a card on file,
 * the packs and their purchase through the one purchase path (payments/purchase.ts) the API uses
 * too, and the processor's events through the one webhook handler the API mounts too.
 */
export function creditRoutes(ctx: WebContext): FastifyPluginAsync {
  const { deps, signedIn, origin, payments } = ctx;
  const { db } = deps;
  return async (app) => {
    app.get('/api/v1/workspaces/:workspaceId/credits', async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId);
      const [balance, ledger, usage, card] = await Promise.all([
        getBalance(db, workspaceId),
        ledgerHistory(db, workspaceId),
        chargedPerDay(db, workspaceId),
        cardOnFileStatus(db, workspaceId),
      ]);
      return {
        balance: { community: balance.community, purchased: balance.purchased, reserved: balance.reserved },
        ledger,
        usage,
        // Adding a card is offered where it can still earn the signup credits and Stripe is configured.
        // Offered until the credits are earned: a card that earned nothing (used elsewhere) can be replaced.
        card: { onFileSince: card.at, offer: card.creditsAvailable && Boolean(payments?.startCardSetup) },
      };
    });

    // Card on file: a hosted Checkout page in setup mode (a SetupIntent); nothing is charged, now or
    // later. The 4,000 credits come with Stripe's signed setup_intent.succeeded event, not with the
    // return to this page.
    app.post('/api/v1/workspaces/:workspaceId/card', async (request, reply) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId, ['owner']);
      if (!payments?.startCardSetup) throw new AppError('SERVICE_UNAVAILABLE', 'Cards cannot be added on this server: it has no payment processor configured (STRIPE_SECRET_KEY)');
      const status = await cardOnFileStatus(db, workspaceId);
      if (!status.creditsAvailable) {
        if (status.at !== null) return reply.code(200).send({ card: { onFileSince: status.at } });
        throw new AppError('FORBIDDEN', 'The card-on-file credits belong to a person’s own workspace; team workspaces buy packs');
      }
      const checkout = await payments.startCardSetup({ workspaceId, email: person.email, successUrl: `${origin}/?card=added`, cancelUrl: `${origin}/?card=cancelled` });
      return reply.code(201).send({ checkoutUrl: checkout.url });
    });

    const purchaseMode = !payments ? 'unavailable' : payments.name === 'stripe' ? 'stripe' : 'development';
    app.get('/api/v1/workspaces/:workspaceId/packs', async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId);
      const first = await firstPackBonusAvailable(db, workspaceId);
      return {
        purchases: purchaseMode,
        packs: PACK_NAMES.map((n) => ({ name: n, label: PACKS[n].label, credits: PACKS[n].credits, priceCents: PACKS[n].priceCents, bonusCredits: packGrant(PACKS[n], first).bonusCredits })),
      };
    });

    app.post('/api/v1/workspaces/:workspaceId/purchases', async (request, reply) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId, ['owner', 'admin']);
      const body = parseBody(purchaseBody, request.body);
      const idempotencyKey = `console:${body.idempotencyKey}`;
      if (!payments) throw new AppError('SERVICE_UNAVAILABLE', 'Purchases are not available on this server: it has no payment processor configured (STRIPE_SECRET_KEY)');
      const { purchase, checkoutUrl } = await purchasePack(
        { db, payments },
        {
          accountId: workspaceId,
          pack: body.pack,
          idempotencyKey,
          email: person.email,
          returnTo: { success: (purchaseId) => `${origin}/?purchase=${purchaseId}`, cancel: `${origin}/?purchase=cancelled` },
        },
      );
      if (checkoutUrl) return reply.code(201).send({ checkoutUrl, purchase });
      // Paid at once (the development gateway) is 201 as often as it is asked; a hosted purchase
      // already settled is answered as it stands.
      return reply.code(payments.name === 'recording' ? 201 : 200).send({ purchase });
    });

    // The processor's events (Stripe's), through the one webhook handler the API mounts too.
    await registerPaymentWebhook(app, STRIPE_WEBHOOK, { db, payments });
  };
}
