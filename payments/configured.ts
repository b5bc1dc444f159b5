import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { PaymentGateway } from './gateway.ts';
import { RecordingPaymentGateway } from './recording-gateway.ts';
import { StripeGateway } from './stripe.ts';

/**
 * The gateway this deployment sells through, the same for the API and the console, or null
 * (purchases and cards refused): Stripe when STRIPE_SECRET_KEY is set, else the recording gateway
 * when PAYMENTS_GATEWAY names it, else none. The recording gateway grants credits without
 * charging a card, so it runs only when named, never as a fallback for an unset NODE_ENV.
 */
export function configuredPaymentGateway(
  config: Pick<Config, 'PAYMENTS_GATEWAY' | 'STRIPE_SECRET_KEY' | 'STRIPE_WEBHOOK_SECRET' | 'STRIPE_API_URL'>,
  db: Db,
): PaymentGateway | null {
  return StripeGateway.fromConfig(config, db) ?? (config.PAYMENTS_GATEWAY === 'recording' ? new RecordingPaymentGateway(db) : null);
}
