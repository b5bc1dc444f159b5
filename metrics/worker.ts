import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { CPU_MS_BUCKETS } from './api.ts';

const VENDOR_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120];
/** Tokens of one vendor call: a small photo and one lens is hundreds, full-analysis thousands. */
const TOKEN_BUCKETS = [100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000];

/**
 * What a worker process measures: vendor calls (by vendor and task kind; failures also by kind
 * of failure) and the credit movements its activities and sweeper make. Amounts are credits.
 */
export function createWorkerMetrics(registry = new Registry()) {
  // prom-client's process figures: process_resident_memory_bytes, process_cpu_seconds_total,
  // process_start_time_seconds, nodejs_heap_size_used_bytes, nodejs_eventloop_lag_p99_seconds, ...
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    vendorCalls: new Counter({
      registers,
      name: 'lenstack_vendor_calls_total',
      help: 'Vendor call attempts by vendor and task (lenses, draft-schema, vehicle-photo, vehicle-report).',
      labelNames: ['vendor', 'task'],
    }),
    vendorFailures: new Counter({
      registers,
      name: 'lenstack_vendor_failures_total',
      help: 'Failed vendor call attempts by vendor, task and kind (unavailable, rejected, invalid_output, aborted, not_configured, error).',
      labelNames: ['vendor', 'task', 'kind'],
    }),
    vendorDuration: new Histogram({
      registers,
      name: 'lenstack_vendor_call_duration_seconds',
      help: 'Duration of vendor call attempts by vendor and outcome (ok or the failure kind).',
      labelNames: ['vendor', 'outcome'],
      buckets: VENDOR_BUCKETS,
    }),
    vendorTokens: new Histogram({
      registers,
      name: 'lenstack_vendor_tokens',
      help: 'Tokens one answered vendor call billed (for task="lenses", one photo\'s analysis), by vendor, configured model, task, stack (the named stack, or none) and kind: input (all input, cached included), cached_input (read from the vendor\'s prompt cache), cache_write_input (written to it, Anthropic), output.',
      labelNames: ['vendor', 'model', 'task', 'stack', 'kind'],
      buckets: TOKEN_BUCKETS,
    }),
    activityCpu: new Histogram({
      registers,
      name: 'lenstack_activity_cpu_milliseconds',
      help: 'CPU milliseconds the worker process spent on one activity execution (its equal share while activities overlap: core/cpu-shares.ts), by activity type; an analysis is its reserve, vendor-call and persist activities.',
      labelNames: ['activity'],
      buckets: CPU_MS_BUCKETS,
    }),
    vendorBudgetWait: new Histogram({
      registers,
      name: 'lenstack_vendor_budget_wait_seconds',
      help: 'How long vendor calls waited for a slot in the vendor budget shared by every worker, by vendor and lane (interactive, batch).',
      labelNames: ['vendor', 'lane'],
      buckets: [0, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    }),
    vendorThrottled: new Counter({
      registers,
      name: 'lenstack_vendor_throttled_total',
      help: 'Vendor calls answered 429 (beyond the vendor account\'s limits), by vendor: each shrinks the shared budget.',
      labelNames: ['vendor'],
    }),
    reservations: new Counter({
      registers,
      name: 'lenstack_credit_reservations_total',
      help: 'Reservation events applied to the ledger: reserved, settled, released (compensation) and swept (expired, closed by the sweeper).',
      labelNames: ['event'],
    }),
    credits: new Counter({
      registers,
      name: 'lenstack_credits_total',
      help: 'Credits moved: reserved (held), settled (charged at settle), refunded (returned at settle), released (returned by a release), swept (returned by the sweeper), swept_charged (charged by the sweeper for an analysis persisted before its workflow ended).',
      labelNames: ['event'],
    }),
    reservationsSwept: new Counter({
      registers,
      name: 'lenstack_reservations_swept_total',
      help: 'Expired reservations the sweeper closed (their workflow ended without settling or releasing).',
    }),
    blobsCollected: new Counter({
      registers,
      name: 'lenstack_blobs_collected_total',
      help: 'Stored images no registry held past their grace period, deleted by the collector.',
    }),
    blobBytesCollected: new Counter({
      registers,
      name: 'lenstack_blob_bytes_collected_total',
      help: 'Bytes of the blobs the collector deleted.',
    }),
    workCopies: new Counter({
      registers,
      name: 'lenstack_work_copies_total',
      help: 'Vendor work copies looked up by vendor attempts: decoded (the original read and decoded: once per image per analysis, again on a fallback to a vendor billing a larger size) or reused (retries, fallbacks to a vendor billing no more, further tasks).',
      labelNames: ['outcome'],
    }),
    preparedUploads: new Counter({
      registers,
      name: 'lenstack_prepared_uploads_total',
      help: "A vehicle's next photo prepared for its vendor during the current call: made (stored for its call), failed (its own call decodes it), used by its call, or missed (not readable: its call decoded it).",
      labelNames: ['outcome'],
    }),
    sweeperFailures: new Counter({
      registers,
      name: 'lenstack_sweeper_failures_total',
      help: 'Sweeper passes that failed (the next pass retries).',
    }),
  };
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;
