import { ActivityFailure, ApplicationFailure, isCancellation, proxyActivities, proxyLocalActivities, workflowInfo, type ActivityOptions, type LocalActivityOptions } from '@temporalio/workflow';
import { Compensations } from './saga.ts';
import { VENDOR_ACTIVITY } from '../core/vendor-names.ts';
import type { Activities } from '../activities/index.ts';
import { MAX_ATTEMPT_MS, VENDOR_ATTEMPTS, vendorAttemptTimeoutMs } from './deadlines.ts';
import type { HashedRef, ImageRef, Lane, PhotoHashes, Vendor, VendorCallInput, VendorCallResult } from './types.ts';
import { VENDOR_INVALID_OUTPUT, VENDOR_NOT_CONFIGURED, VENDOR_QUOTA, VENDOR_REJECTED } from './types.ts';

/** Our error code for an image that cannot be decoded (core/errors.ts; workflow code cannot import it). */
const IMAGE_INVALID = 'IMAGE_INVALID';

/**
 * Database steps: retried patiently, never on a domain refusal. They run as local activities, in
 * the worker that runs the workflow, with no task-queue round trip per step. Each is one
 * idempotent transaction, so a worker dying after one ran just runs it again.
 */
export const DB_LOCAL_OPTIONS: LocalActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '5 seconds',
    maximumAttempts: 20,
    nonRetryableErrorTypes: ['PLAN_LIMIT_EXCEEDED', 'RATE_LIMITED', 'REQUEST_ID_CONFLICT', IMAGE_INVALID],
  },
};

/**
 * Vendor calls heartbeat every second, so a worker killed mid-call is noticed in seconds and the
 * call retried elsewhere; the retry policy is bounded, then the caller falls back.
 */
export const VENDOR_OPTIONS: ActivityOptions = {
  startToCloseTimeout: '120 seconds',
  heartbeatTimeout: '5 seconds',
  retry: {
    initialInterval: '500 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '4 seconds',
    maximumAttempts: VENDOR_ATTEMPTS,
    nonRetryableErrorTypes: [VENDOR_REJECTED, VENDOR_INVALID_OUTPUT, VENDOR_NOT_CONFIGURED, VENDOR_QUOTA, IMAGE_INVALID],
  },
};

// One proxy per latency profile: each step kind gets the timeouts and retries that fit it.
// `dbSteps`: the short database steps (reserve, persist, settle, release), run as local activities.
export const dbSteps = proxyLocalActivities<Activities>(DB_LOCAL_OPTIONS);
const vendor = proxyActivities<Activities>(VENDOR_OPTIONS);


function failureType(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure ? (cause.type ?? undefined) : undefined;
}

/**
 * One vendor call with fallback: each vendor in order gets its bounded retries; the first answer
 * wins. All failing → PROVIDER_ERROR when any vendor answered explicitly (error or invalid output),
 * else PROVIDER_UNAVAILABLE. `summary` labels the activity in the Temporal UI.
 *
 * An attempt that got no slot in its vendor's budget (VENDOR_QUOTA: no call was made) waits again
 * for the same vendor while the run has time left, or, with VENDOR_OVERFLOW, goes to the next
 * vendor (and from the last back to the first): the budget's wait is not a vendor failure
 * (docs/decisions.md, "Vendor quotas"). Out of time, the run fails PROVIDER_UNAVAILABLE, and its
 * saga gives the credits back.
 */
export async function callWithFallback(
  chain: {
    vendors: Vendor[];
    /** Deadline of one attempt, sized so the chain ends inside the workflow timeout (workflows/deadlines.ts). */
    attemptTimeoutMs: number;
    /** Counts every vendor tried, so a run that fails can count what it spent. */
    tally: { calls: number };
    /** Whose work this is (the vendor budget's lanes); absent = interactive. */
    lane?: Lane | undefined;
    /** VENDOR_OVERFLOW: a vendor with no budget left passes the call to the next one. */
    overflow?: boolean | undefined;
  },
  input: VendorCallInput,
  summary: string,
): Promise<{ result: VendorCallResult; fellBackFrom: Vendor[] }> {
  const { vendors, tally } = chain;
  const fellBackFrom: Vendor[] = [];
  let explicitError = false;
  let lastMessage = 'no AI provider is configured';
  const call: VendorCallInput = { ...input, ...(chain.lane === 'batch' ? { lane: 'batch' as const } : {}), ...(chain.overflow && vendors.length > 1 ? { overflow: true } : {}) };
  const { executionTimeoutMs, runStartTime } = workflowInfo();
  // Waiting for budget again leaves the rest of the run room: this chain's worst case once more.
  const timeForAnotherWait = () => !executionTimeoutMs || runStartTime.getTime() + executionTimeoutMs - Date.now() > 3 * VENDOR_ATTEMPTS * chain.attemptTimeoutMs;
  // After one round of overflow found no vendor with a slot, each attempt waits for its slot again
  // (half its deadline) before passing the call on: no round of instant refusals after another.
  let patient = false;
  for (let i = 0; i < vendors.length; ) {
    const v = vendors[i]!;
    tally.calls += 1;
    try {
      const result = await vendor[VENDOR_ACTIVITY[v]].executeWithOptions({ ...VENDOR_OPTIONS, startToCloseTimeout: chain.attemptTimeoutMs, summary: `${v}: ${summary}` }, [patient ? { ...call, overflow: false } : call]);
      return { result, fellBackFrom };
    } catch (err) {
      // A cancelled workflow stops here: the next vendor would be cancelled too, and the caller
      // must learn the run was cancelled, not that every provider failed.
      if (isCancellation(err)) throw err;
      const type = failureType(err);
      if (type === VENDOR_QUOTA) {
        tally.calls -= 1; // no vendor call was made
        lastMessage = `${v}: no slot in the vendor's rate-limit budget`;
        if (chain.overflow && vendors.length > 1) {
          if (!fellBackFrom.includes(v)) fellBackFrom.push(v);
          i = (i + 1) % vendors.length;
          if (i === 0) {
            if (!timeForAnotherWait()) break;
            patient = true;
          }
          continue;
        }
        if (timeForAnotherWait()) continue;
        break;
      }
      // The image itself cannot be prepared: another vendor would get the same bytes (422 for the caller).
      if (type === IMAGE_INVALID) throw err;
      if (type === VENDOR_REJECTED || type === VENDOR_INVALID_OUTPUT) explicitError = true;
      lastMessage = (err instanceof ActivityFailure && err.cause ? err.cause.message : (err as Error).message) ?? lastMessage;
      if (!fellBackFrom.includes(v)) fellBackFrom.push(v);
      i++;
    }
  }
  throw ApplicationFailure.nonRetryable(
    `Every configured AI provider failed (${fellBackFrom.join(', ') || 'none configured'}): ${lastMessage}`,
    explicitError ? 'PROVIDER_ERROR' : 'PROVIDER_UNAVAILABLE',
  );
}

export const short = (sha256: string) => sha256.slice(0, 12);

/** The vendor chain of one run: the vendors in order, one attempt's deadline, and every call tried. */
export type VendorChain = Parameters<typeof callWithFallback>[0];

/**
 * What every saga starts with: its workflow id, its reservation's id, the undo list, and the tally
 * of vendor calls that a failed run counts against the daily budget of unbilled calls (the first
 * compensation registered, so the last to run).
 */
export function startSaga(input: { userId: string }): { workflowId: string; reservationId: string; saga: Compensations; tally: { calls: number } } {
  const { workflowId } = workflowInfo();
  const saga = new Compensations();
  const tally = { calls: 0 };
  saga.add('count unbilled vendor calls', () => (tally.calls ? dbSteps.countUnbilledCalls({ userId: input.userId, calls: tally.calls }) : Promise.resolve()));
  return { workflowId, reservationId: `res:${workflowId}`, saga, tally };
}

/**
 * The chain for the vendors the worker's reserve step named (the workflow input names none: only
 * the worker knows which vendors are configured), each attempt's deadline sized from this run's
 * own execution timeout.
 */
export function vendorChain(vendors: Vendor[], tally: { calls: number }, opts: { lane?: Lane | undefined; overflow?: boolean | undefined } = {}): VendorChain {
  const workflowTimeoutMs = workflowInfo().executionTimeoutMs;
  const attemptTimeoutMs = workflowTimeoutMs ? vendorAttemptTimeoutMs({ workflowTimeoutMs, vendors: vendors.length }) : MAX_ATTEMPT_MS;
  return { vendors, attemptTimeoutMs, tally, lane: opts.lane, overflow: opts.overflow };
}

/**
 * Each image with its perceptual hashes: those it came with (the caller's registry), those a vendor
 * call made from the worker's decode (`found`, by SHA-256), and for any still missing (a photo a
 * concurrent run registered between intake and the reservation, so no call here decoded it) one
 * step that reads them from the registry or decodes the photo. An image that does not decode
 * fails that step with IMAGE_INVALID, and the saga releases what it holds.
 */
export async function withHashes(accountId: string, images: readonly ImageRef[], found: Iterable<readonly [string, PhotoHashes | undefined]>): Promise<HashedRef[]> {
  const bySha = new Map<string, PhotoHashes>();
  for (const [sha256, hashes] of found) if (hashes) bySha.set(sha256, hashes);
  for (const img of images) if (img.pHash !== null && img.dHash !== null) bySha.set(img.sha256, { pHash: img.pHash, dHash: img.dHash });
  const missing = [...new Set(images.filter((img) => !bySha.has(img.sha256)).map((img) => img.sha256))];
  if (missing.length) {
    const made = await dbSteps.photoHashes({ userId: accountId, sha256s: missing });
    for (const sha256 of missing) bySha.set(sha256, made[sha256]!);
  }
  return images.map((img) => ({ ...img, ...bySha.get(img.sha256)! }));
}

/** What a vendor call on `img` asks for besides its task: the hashes, when the image has none yet. */
export const hashesWanted = (img: ImageRef): { fingerprint?: true } => (img.pHash === null ? { fingerprint: true } : {});
