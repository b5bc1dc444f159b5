/**
 * How long one vendor attempt may take, so that the whole fallback chain of an analysis ends well
 * inside the workflow's own timeout. Pure: the workflow computes it from its own execution timeout
 * and the vendors the worker has (workflows/steps.ts vendorChain).
 *
 * Worst case of one chain: every configured vendor, each `VENDOR_ATTEMPTS` attempts, each hung to
 * its deadline. An analysis can run two chains one after the other (drafting an extraction schema,
 * then the image; a vehicle report's photos, then its synthesis), so the chains get half the
 * workflow timeout between them; the other half covers the retry backoff, the database steps and
 * the waits for workflow tasks.
 */
export const VENDOR_ATTEMPTS = 3;
const CHAINS = 2;
export const MAX_ATTEMPT_MS = 120_000;
const MIN_ATTEMPT_MS = 1_000;

export function vendorAttemptTimeoutMs(args: { workflowTimeoutMs: number; vendors: number }): number {
  const share = args.workflowTimeoutMs / (2 * CHAINS * Math.max(1, args.vendors) * VENDOR_ATTEMPTS);
  return Math.max(MIN_ATTEMPT_MS, Math.min(MAX_ATTEMPT_MS, Math.floor(share)));
}
