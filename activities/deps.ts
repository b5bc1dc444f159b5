import { ApplicationFailure } from '@temporalio/activity';
import type { Config } from '../core/config.ts';
import { AppError } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import type { WorkerMetrics } from '../metrics/worker.ts';
import type { VendorBudget } from '../vendors/budget.ts';
import type { VisionClient } from '../vendors/types.ts';
import type { WorkCopies } from '../vendors/work-copies.ts';
import type { Vendor } from '../workflows/types.ts';

/** What the worker builds once and every activity shares (built by a factory, as Temporal's samples do). */
export interface ActivityDeps {
  config: Config;
  db: Db;
  blobs: BlobStore;
  vision: Map<Vendor, VisionClient>;
  /** The originals decoded once for the vendors (vendors/work-copies.ts). */
  workCopies: WorkCopies;
  /** How batch photos given by URL are fetched (default: public addresses only). */
  fetchPolicy?: FetchPolicy;
  /** Vendor-call and credit counters (metrics/worker.ts). */
  metrics: WorkerMetrics;
  /** Each vendor's rate limits, shared by every worker (vendors/budget.ts); absent = calls go unpaced. */
  budget?: VendorBudget;
  /** Told once when the budget's Redis does not answer and calls go on without it (fail open). */
  onBudgetOutage?: (err: Error) => void;
}

/** Our domain errors cross into Temporal as failures typed by their code (non-retryable unless marked retryable). */
export function rethrowDomain(err: unknown): never {
  if (err instanceof AppError) {
    throw ApplicationFailure.create({
      message: err.message,
      type: err.code,
      nonRetryable: !err.retryable,
      // [envelope fields, response headers]: both cross back to the API (analysis/await-workflow.ts).
      details: [err.details ?? null, err.headers ?? null],
    });
  }
  throw err;
}
