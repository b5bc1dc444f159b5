/**
 * Payment capture behind one interface: the grant logic in credits/packs.ts is real and
 * talks only to this. Implementations: payments/recording-gateway.ts (development and tests);
 * a card processor's adapter (Stripe-shaped) plugs in here later.
 */
export interface CaptureRequest {
  userId: string;
  /** Amount in US cents. */
  amountCents: number;
  /** The same key always means the same capture: a retry never charges twice. */
  idempotencyKey: string;
  /** Shown on the customer's statement / receipt. */
  description: string;
}

export interface PaymentGateway {
  /**
   * Capture a payment, or throw. A definitive refusal (card declined) is a PaymentDeclinedError;
   * anything else (network, gateway down) is thrown plainly and may be retried with the same key.
   */
  capture(req: CaptureRequest): Promise<{ paymentId: string }>;
}

/** The gateway refused the payment for good: retrying the same capture gives the same answer. */
export class PaymentDeclinedError extends Error {
  override name = 'PaymentDeclinedError';
  constructor(readonly reason: string) {
    super(`payment declined: ${reason}`);
  }
}
