import { registerProcessMetrics } from './process.ts';
import { Registry } from './registry.ts';

const VENDOR_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120];

/**
 * What a worker process measures: vendor calls (by vendor and task kind; failures also by kind
 * of failure) and the credit movements its activities and sweeper make. Amounts are credits.
 */
export function createWorkerMetrics(registry = new Registry()) {
  registerProcessMetrics(registry);
  return {
    registry,
    vendorCalls: registry.counter({
      name: 'lenstack_vendor_calls_total',
      help: 'Vendor call attempts by vendor and task (lenses, draft-schema, vehicle-photo, vehicle-report).',
      labelNames: ['vendor', 'task'],
    }),
    vendorFailures: registry.counter({
      name: 'lenstack_vendor_failures_total',
      help: 'Failed vendor call attempts by vendor, task and kind (unavailable, rejected, invalid_output, aborted, not_configured, error).',
      labelNames: ['vendor', 'task', 'kind'],
    }),
    vendorDuration: registry.histogram({
      name: 'lenstack_vendor_call_duration_seconds',
      help: 'Duration of vendor call attempts by vendor and outcome (ok or the failure kind).',
      labelNames: ['vendor', 'outcome'],
      buckets: VENDOR_BUCKETS,
    }),
    reservations: registry.counter({
      name: 'lenstack_credit_reservations_total',
      help: 'Reservation events applied to the ledger: reserved, settled, released (compensation) and swept (expired, closed by the sweeper).',
      labelNames: ['event'],
    }),
    credits: registry.counter({
      name: 'lenstack_credits_total',
      help: 'Credits moved: reserved (held), settled (charged at settle), refunded (returned at settle), released (returned by a release), swept (returned by the sweeper), swept_charged (charged by the sweeper for an analysis persisted before its workflow ended).',
      labelNames: ['event'],
    }),
    reservationsSwept: registry.counter({
      name: 'lenstack_reservations_swept_total',
      help: 'Expired reservations the sweeper closed (their workflow ended without settling or releasing).',
    }),
    sweeperFailures: registry.counter({
      name: 'lenstack_sweeper_failures_total',
      help: 'Sweeper passes that failed (the next pass retries).',
    }),
  };
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;
