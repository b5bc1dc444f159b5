import { Client, Connection } from '@temporalio/client';
import type { Decision, RequestLimiter } from '../../ratelimit/limiter.ts';
import type { ScriptBucket } from '../../ratelimit/script.ts';

/**
 * The API's dependencies are all required (docs/architecture.md, "Dependencies"); tests that are not
 * about one of them pass one of these in its place, saying so, instead of leaving it out.
 */

/**
 * A real Temporal client whose server is never there: nothing listens on port 1, and with no
 * retry interceptor every call fails at once with UNAVAILABLE — the same path as a Temporal that is
 * down (a live analyze answers 503 with Retry-After). For tests of validation, auth, sandbox
 * answers and the registry, which never reach a workflow.
 */
export function unreachableTemporal(): Client {
  return new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', interceptors: [] }) });
}

/** Admits every request, counts nothing: for tests that are not about rate limits. */
export const noRateLimits: RequestLimiter = {
  ready: true,
  async hit<B extends ScriptBucket>(buckets: readonly B[]): Promise<Decision<B>> {
    const states = buckets.map((bucket) => ({ bucket, remaining: bucket.limit, resetMs: 0 }));
    return { admitted: true, now: Date.now(), retryAfterMs: 0, tightest: states[0]!, buckets: states };
  },
  async close() {},
};

/** For upload tests with no batch waiting on their uploads: nothing to tell (batches/upload-waits.ts). */
export const noUploadWaiters = async (): Promise<void> => {};

/**
 * How long a test's rate limiter waits for Redis before failing open (production: 500 ms,
 * RATE_LIMIT_TIMEOUT_MS). Tests that count limits must not see a request let through because the
 * loaded machine stalled a check; fail-open.test.ts tests the short wait itself.
 */
export const LOADED_MACHINE_REDIS_MS = 10_000;
