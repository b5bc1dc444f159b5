import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { PaymentGateway } from './gateway.ts';
import { RecordingPaymentGateway } from './recording-gateway.ts';

/**
 * The gateway this deployment sells packs through, or null (purchases refused). The recording
 * gateway grants credits without charging a card, so it runs only when PAYMENTS_GATEWAY names it,
 * never as a fallback for an unset NODE_ENV.
 */
export function configuredPaymentGateway(config: Pick<Config, 'PAYMENTS_GATEWAY'>, db: Db): PaymentGateway | null {
  return config.PAYMENTS_GATEWAY === 'recording' ? new RecordingPaymentGateway(db) : null;
}
