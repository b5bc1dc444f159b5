import { isGrpcServiceError, ServiceError, WorkflowExecutionAlreadyStartedError, WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, TemporalFailure, TerminatedFailure, TimeoutFailure } from '@temporalio/common';
import type { BaseLogger } from 'pino';
import { AppError, isErrorCode } from '../core/errors.ts';
import type { ApiMetrics } from '../metrics/api.ts';

/**
 * A run ended from outside (an operator terminated or cancelled it, or it hit its execution
 * timeout) never answers under this request id: the same x-request-id attaches to the ended run
 * again. Say so, and what happens to the credits (the sweeper closes the reservation at expiry).
 */
const ENDED_RUN =
  'Send the request again with a new x-request-id (or none). Credits it held go back to the balance when its reservation expires, ' +
  'unless it had already saved its results, which are then charged once and served as a cache hit.';

/** How a run ended from outside, as the caller is told. */
const ENDED_BY: Array<[new (...args: never[]) => TemporalFailure, string]> = [
  [TerminatedFailure, 'was stopped by an operator before it finished'],
  [TimeoutFailure, 'did not finish within its time limit'],
  [CancelledFailure, 'was cancelled before it finished'],
];

/** How long starting a workflow may take before the caller is told to retry (503). */
const START_DEADLINE_MS = 5_000;

/**
 * While awaiting a result, Temporal is probed this often; once it has not answered for
 * UNREACHABLE_FOR_MS the caller gets a 503 instead of waiting out the outage (docs/decisions.md,
 * "Temporal down while a caller waits"). The workflow goes on when Temporal is back.
 */
const PROBE_EVERY_MS = 2_000;
const UNREACHABLE_FOR_MS = 10_000;

/** gRPC codes for a Temporal frontend that cannot be reached or did not answer in time. */
const UNREACHABLE = new Set([14 /* UNAVAILABLE */, 4 /* DEADLINE_EXCEEDED */]);

/**
 * The 503 of a start that never reached Temporal (every try UNAVAILABLE, the last one still waiting
 * for a connection at the deadline), so no workflow runs under this id and the request's images
 * can go. In theory a try could have been delivered with its answer lost; that workflow would find
 * no image, fail and release its credits (docs/decisions.md), which costs the caller nothing.
 */
export class WorkflowNotStarted extends AppError {}

const GRPC_UNAVAILABLE = 14;

function grpcCode(err: unknown): number | undefined {
  const grpc = err instanceof ServiceError ? err.cause : err;
  return isGrpcServiceError(grpc) ? grpc.code : undefined;
}

/** Whether `err` says Temporal itself could not be reached (not that a workflow failed). */
export function temporalUnreachable(err: unknown): boolean {
  const grpc = err instanceof ServiceError ? err.cause : err;
  return isGrpcServiceError(grpc) && UNREACHABLE.has(grpc.code);
}

/** Find our error code in a workflow failure's cause chain and turn it back into an AppError. */
export function appErrorFromWorkflow(err: unknown): AppError {
  if (temporalUnreachable(err)) {
    return new AppError(
      'SERVICE_UNAVAILABLE',
      'The analysis pipeline is unreachable right now. Send the same request again with the same x-request-id in a moment: it is billed at most once.',
      { headers: { 'retry-after': '5' } },
    );
  }
  if (err instanceof WorkflowFailedError) {
    const ended = ENDED_BY.find(([kind]) => err.cause instanceof kind);
    if (ended) return new AppError('INTERNAL_ERROR', `This analysis ${ended[1]}. ${ENDED_RUN}`);
  }
  let cur: unknown = err instanceof WorkflowFailedError ? err.cause : err;
  while (cur instanceof TemporalFailure) {
    if (cur instanceof ApplicationFailure && isErrorCode(cur.type)) {
      const details = (cur.details?.[0] ?? undefined) as Record<string, unknown> | undefined;
      const headers = (cur.details?.[1] ?? undefined) as Record<string, string> | undefined;
      return new AppError(cur.type, cur.message, {
        ...(details ? { details } : {}),
        ...(cur.type === 'PLAN_LIMIT_EXCEEDED' ? { headers: { 'cache-control': 'no-store, private' } } : headers ? { headers } : {}),
      });
    }
    cur = cur.cause;
  }
  return new AppError('INTERNAL_ERROR', 'Analysis failed unexpectedly');
}

export interface WorkflowWaitDeps {
  temporal: Client;
  /** The request's logger (carries requestId); absent in tests of the service alone. */
  log?: Pick<BaseLogger, 'info' | 'warn' | 'error'>;
  metrics: ApiMetrics;
  /** Aborted when the API gives up waiting at shutdown (api/drain.ts). */
  abandon?: AbortSignal;
}

class Abandoned extends Error {}

/** Resolves like `promise`, or rejects with Abandoned as soon as `signal` aborts. */
function unlessAbandoned<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new Abandoned());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Abandoned());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/**
 * Start a workflow (or attach to the one this request id already started: a client retry) and
 * await its result. Logs the workflow id on the request's log lines, measures the wait, and maps
 * failures to our errors. At shutdown, past the grace time, it stops waiting with a retryable 503:
 * the workflow goes on, and the same request id later attaches to it and gets its result.
 */
export async function startAndAwait<T>(
  deps: WorkflowWaitDeps,
  workflow: 'analyze' | 'vehicle',
  workflowId: string,
  start: () => Promise<{ result(): Promise<T> }>,
): Promise<T> {
  const t0 = performance.now();
  const elapsedMs = () => Math.round(performance.now() - t0);
  let handle: { result(): Promise<T> };
  let attached = false;
  try {
    // A frontend that does not answer fails the request within seconds, not after every gRPC retry.
    handle = await deps.temporal.connection.withDeadline(Date.now() + START_DEADLINE_MS, start);
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
      deps.log?.error({ workflowId, err }, 'workflow start failed');
      const mapped = appErrorFromWorkflow(err);
      // Only a start that never got a connection surely did not start anything. One that ran out
      // of time (DEADLINE_EXCEEDED) may have been delivered and its run be reading the images: they
      // stay, for the blob collector to delete after its grace period if no registry holds them.
      if (temporalUnreachable(err) && grpcCode(err) === GRPC_UNAVAILABLE) throw new WorkflowNotStarted(mapped.code, mapped.message, { headers: mapped.headers ?? {}, cause: err });
      throw mapped;
    }
    handle = deps.temporal.workflow.getHandle<() => Promise<T>>(workflowId);
    attached = true;
  }
  deps.metrics.workflowsStarted.inc({ workflow, start: attached ? 'attached' : 'new' });
  deps.log?.info({ workflowId, attached }, attached ? 'attached to the running workflow of this request id' : 'workflow started');

  const result = handle.result();
  // Abandoning leaves this promise to settle when the connection closes; nobody awaits it then.
  result.catch(() => {});
  const probing = new AbortController();
  try {
    const value = await Promise.race([unlessAbandoned(result, deps.abandon), whileReachable(deps.temporal, probing.signal)]);
    deps.metrics.workflowDuration.observe({ workflow, outcome: 'succeeded' }, elapsedMs() / 1000);
    deps.log?.info({ workflowId, durationMs: elapsedMs() }, 'workflow completed');
    return value;
  } catch (err) {
    if (err instanceof TemporalAway) {
      deps.metrics.workflowDuration.observe({ workflow, outcome: 'abandoned' }, elapsedMs() / 1000);
      deps.log?.warn({ workflowId, durationMs: elapsedMs() }, `Temporal unreachable for ${UNREACHABLE_FOR_MS} ms: stopped waiting for the workflow, which goes on`);
      throw appErrorFromWorkflow(err.cause);
    }
    if (err instanceof Abandoned) {
      deps.metrics.workflowDuration.observe({ workflow, outcome: 'abandoned' }, elapsedMs() / 1000);
      deps.log?.warn({ workflowId, durationMs: elapsedMs() }, 'shutting down: stopped waiting for the workflow, which goes on');
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        'This server is shutting down before the analysis finished. The analysis goes on: send the same request with the same x-request-id to get its result (billed once).',
        { headers: { 'retry-after': '2' } },
      );
    }
    const appErr = appErrorFromWorkflow(err);
    deps.metrics.workflowDuration.observe({ workflow, outcome: 'failed' }, elapsedMs() / 1000);
    const fields = { workflowId, durationMs: elapsedMs(), code: appErr.code };
    if (appErr.status >= 500) deps.log?.warn({ ...fields, err }, 'workflow failed');
    else deps.log?.info(fields, 'workflow failed');
    throw appErr;
  } finally {
    probing.abort();
  }
}

class TemporalAway extends Error {}

/**
 * Never resolves; rejects with TemporalAway once Temporal has not answered a probe for
 * UNREACHABLE_FOR_MS of this wait (a result long-poll alone would wait out the outage: its gRPC
 * retries wait for a connection). Stops when `stop` aborts. One probe loop per client serves every
 * request waiting on it, however many there are.
 */
function whileReachable(temporal: Client, stop: AbortSignal): Promise<never> {
  let watch = watches.get(temporal);
  if (!watch) watches.set(temporal, (watch = new ReachabilityWatch(temporal)));
  return watch.wait(stop);
}

const watches = new WeakMap<Client, ReachabilityWatch>();

/** Probes one Temporal client every PROBE_EVERY_MS while anyone waits on it. */
class ReachabilityWatch {
  private readonly waiters = new Map<symbol, { since: number; away: (err: unknown) => void }>();
  /** When the probes began to fail (a probe period before the first failure), if they do. */
  private awaySince: number | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly temporal: Client) {}

  wait(stop: AbortSignal): Promise<never> {
    return new Promise<never>((_, reject) => {
      if (stop.aborted) return;
      const id = Symbol('waiter');
      this.waiters.set(id, { since: Date.now(), away: (err) => reject(new TemporalAway('Temporal unreachable', { cause: err })) });
      stop.addEventListener('abort', () => this.waiters.delete(id), { once: true });
      this.timer ??= setTimeout(() => void this.probe(), PROBE_EVERY_MS);
    });
  }

  private async probe(): Promise<void> {
    try {
      await this.temporal.connection.withDeadline(Date.now() + PROBE_EVERY_MS, () => this.temporal.connection.workflowService.getSystemInfo({}));
      this.awaySince = undefined;
    } catch (err) {
      if (temporalUnreachable(err)) {
        this.awaySince ??= Date.now() - PROBE_EVERY_MS;
        // Each wait counts from its own start: Temporal away for UNREACHABLE_FOR_MS of it.
        for (const [id, waiter] of this.waiters) {
          if (Date.now() - Math.max(this.awaySince, waiter.since) >= UNREACHABLE_FOR_MS) {
            this.waiters.delete(id);
            waiter.away(err);
          }
        }
      }
    }
    this.timer = undefined;
    if (this.waiters.size > 0) this.timer = setTimeout(() => void this.probe(), PROBE_EVERY_MS);
    else this.awaySince = undefined;
  }
}
