/**
 * The one payments interface (docs/architecture.md "Who owns payments"). The API's pack purchase
 * and the console's checkout both go through `purchasePack` (payments/purchase.ts), and every
 * processor event through `handlePaymentWebhook` (payments/webhook.ts); neither knows which
 * gateway is behind it. Implementations: payments/stripe.ts (Stripe through its official SDK) and
 * payments/recording-gateway.ts (development and tests: no card is charged). Which one runs is
 * configuration (payments/configured.ts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { PackName } from '../credits/price-book.ts';

/** Paying for one pack of one purchase. */
export interface PaymentRequest {
  /** Our purchase (credit_purchases.id): a hosted page names it back in its paid event. */
  purchaseId: string;
  /** The account (workspace) the credits go to. */
  accountId: string;
  pack: PackName;
  /** Amount in US cents: the price book's price of the pack, as recorded on the purchase. */
  amountCents: number;
  /** The same key always means the same payment: a retry never charges twice. */
  idempotencyKey: string;
  /** Shown on the customer's statement / receipt. */
  description: string;
  /** The buyer's address, for the processor's receipt. */
  email: string;
  /** Where a hosted payment page sends the buyer back. */
  successUrl: string;
  cancelUrl: string;
}

/**
 * How a payment started: paid at once (the recording gateway), or a hosted page the buyer is sent
 * to, whose processor later sends a signed `pack-paid` event (Stripe Checkout).
 */
export type PaymentStart = { kind: 'paid'; paymentId: string } | { kind: 'checkout'; checkoutId: string; url: string };

/** What a verified webhook delivery means to us; the handler acts on these only. */
export type PaymentEvent =
  | { type: 'pack-paid'; eventId: string; purchaseId: string; amountCents: number; paymentId: string; accountId: string | null }
  | { type: 'card-stored'; eventId: string; workspaceId: string; fingerprint: string }
  | { type: 'ignored'; eventId: string; reason: string };

export interface PaymentGateway {
  /** `stripe` is a real processor; `recording` charges no card (development and tests only). */
  readonly name: 'stripe' | 'recording';
  /**
   * Start paying for a pack, or throw. A definitive refusal (card declined) is a
   * PaymentDeclinedError; anything else (network, gateway down) is thrown plainly and may be
   * retried with the same key.
   */
  startPayment(req: PaymentRequest): Promise<PaymentStart>;
  /**
   * Verify one webhook delivery (the exact text received and its headers, where the processor's
   * signature is) and say what it means; a WebhookSignatureError when it is not the processor's.
   * Absent: this gateway sends no webhooks, and none is accepted.
   */
  readWebhook?(body: string, headers: IncomingHttpHeaders): Promise<PaymentEvent>;
  /**
   * A hosted page that stores a card for the workspace without charging it (the card-on-file
   * credits come with its `card-stored` event). Absent: cards cannot be added through this gateway.
   */
  startCardSetup?(args: { workspaceId: string; email: string; successUrl: string; cancelUrl: string }): Promise<{ url: string }>;
}

/** The gateway refused the payment for good: retrying the same payment gives the same answer. */
export class PaymentDeclinedError extends Error {
  override name = 'PaymentDeclinedError';
  constructor(readonly reason: string) {
    super(`payment declined: ${reason}`);
  }
}

/** A webhook delivery that is not signed by the processor with our secret (or not at all). */
export class WebhookSignatureError extends Error {
  override name = 'WebhookSignatureError';
}
