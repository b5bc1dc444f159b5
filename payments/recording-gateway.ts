import { randomBytes } from 'node:crypto';
import type { Db } from '../db/pool.ts';
import { PaymentDeclinedError, type PaymentGateway, type PaymentRequest, type PaymentStart } from './gateway.ts';

interface RecordedRow {
  id: string;
  user_id: string;
  amount_cents: number;
  status: 'captured' | 'declined';
  decline_reason: string | null;
}

/**
 * The development and test implementation of the payments interface (payments/gateway.ts): no
 * card is charged, the payment is complete at once, every capture is recorded in
 * `recorded_payments`, idempotent by key the way a real processor is (the same key answers the
 * same payment, or the same decline). `decline` lets a test refuse chosen captures.
 */
export class RecordingPaymentGateway implements PaymentGateway {
  readonly name = 'recording' as const;

  constructor(
    private readonly db: Db,
    private readonly opts: { decline?: (req: PaymentRequest) => string | null } = {},
  ) {}

  async startPayment(req: PaymentRequest): Promise<PaymentStart> {
    if (!Number.isSafeInteger(req.amountCents) || req.amountCents <= 0) throw new Error('capture amount must be a positive integer of cents');
    const declineReason = this.opts.decline?.(req) ?? null;
    await this.db.query(
      `INSERT INTO recorded_payments (id, user_id, idempotency_key, amount_cents, description, status, decline_reason)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (idempotency_key) DO NOTHING`,
      [`pay_rec_${randomBytes(12).toString('hex')}`, req.accountId, req.idempotencyKey, req.amountCents, req.description,
        declineReason === null ? 'captured' : 'declined', declineReason],
    );
    // Whether we inserted or lost a race to a concurrent retry, the stored row is the answer.
    const r = await this.db.query<RecordedRow>(
      'SELECT id, user_id, amount_cents, status, decline_reason FROM recorded_payments WHERE idempotency_key = $1',
      [req.idempotencyKey],
    );
    const row = r.rows[0]!;
    if (row.user_id !== req.accountId || row.amount_cents !== req.amountCents) {
      throw new Error(`idempotency key ${req.idempotencyKey} was used for a different capture`);
    }
    if (row.status === 'declined') throw new PaymentDeclinedError(row.decline_reason!);
    return { kind: 'paid', paymentId: row.id };
  }
}
