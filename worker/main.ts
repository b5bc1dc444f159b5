import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundleWorkflowCode, NativeConnection, Runtime, Worker, type RuntimeOptions, type WorkflowBundle } from '@temporalio/worker';
import { interactiveTaskQueue, loadConfig, type Config } from '../core/config.ts';
import type { Logger } from 'pino';
import { createLogger } from '../core/logger.ts';
import { createPool } from '../db/pool.ts';
import { blobStoreFromConfig } from '../images/blobstore-from-config.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import { startMetricsServer, type MetricsServer } from '../metrics/server.ts';
import { activityCpuInterceptor } from './activity-cpu.ts';
import { createWorkerMetrics, type WorkerMetrics } from '../metrics/worker.ts';
import { createVisionClients, simulatorNotice } from '../vendors/index.ts';
import { vendorBudgetFromConfig } from '../vendors/budget.ts';
import type { Vendor } from '../workflows/types.ts';
import type { VisionClient } from '../vendors/types.ts';
import { createWorkCopies } from '../vendors/work-copies.ts';
import { createActivities } from '../activities/index.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from './address.ts';
import { collectBlobs } from './blob-collector.ts';
import { createUploads } from '../uploads/service.ts';
import { sweepOnce } from './sweeper.ts';
import { PinoTemporalLogger } from './temporal-logger.ts';
import { configureHeicDecoder, heicDecoderNotice } from '../images/heic-native.ts';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface RunningWorker {
  /** Polls TEMPORAL_TASK_QUEUE: batches, their children, and runs started there before the interactive queue existed. */
  worker: Worker;
  /** Polls the interactive queue (interactiveTaskQueue): single analyses and vehicle reports, with slots of their own. */
  interactive: Worker;
  /** Resolves when the worker has shut down. */
  done: Promise<void>;
  metrics: WorkerMetrics;
  /** The Prometheus listener's URL when WORKER_METRICS_PORT is set. */
  metricsUrl: string | null;
  /** Stop polling; in-flight activities get SHUTDOWN_GRACE_MS, then are cancelled (and retried elsewhere). */
  shutdown(): Promise<void>;
}

/** Past the grace time, this long more for cancelled activities to report before the worker gives up. */
const FORCE_AFTER_GRACE_MS = 10_000;
/** Activity task slots of each of the process's two Temporal workers, unless the caller says. */
const ACTIVITY_SLOTS = 100;

/**
 * Build the worker's dependencies once and start polling. Two Temporal workers share them: one on
 * TEMPORAL_TASK_QUEUE (batches and their children) and one on the interactive queue, each with its
 * own slots and pollers, so interactive work is dispatched ahead of a batch's queued tasks
 * (docs/decisions.md, "Interactive work ahead of batches"). A sweeper in the same process releases
 * reservations whose workflow died unfinished (terminated, timed out) once they expire.
 * `activitySlots`: activity task slots of each of the two (default 100); a test makes them few to
 * saturate them.
 */
export async function startWorker(
  config: Config,
  opts: { workflowBundle?: WorkflowBundle; sweepIntervalMs?: number; log?: (msg: string) => void; metrics?: WorkerMetrics; fetchPolicy?: FetchPolicy; activitySlots?: number } = {},
): Promise<RunningWorker> {
  const log = opts.log ?? ((m: string) => console.log(`[worker] ${m}`));
  const metrics = opts.metrics ?? createWorkerMetrics();
  const db = createPool(config.DATABASE_URL, { application: 'lenstack-worker' });
  const { clients, warnings } = createVisionClients(config);
  for (const w of warnings) log(w);
  // Once per process: which decoder the work copies of HEICs come from (HEIC_DECODER).
  log(heicDecoderNotice(await configureHeicDecoder(config)).message);
  const vision = new Map<Vendor, VisionClient>(clients.map((c) => [c.vendor, c]));
  const blobs = blobStoreFromConfig(config);
  const workCopies = createWorkCopies({
    read: (sha256) => blobs.get(sha256),
    maxBytes: config.WORK_COPY_CACHE_BYTES,
    maxPixels: config.IMAGE_MAX_PIXELS,
    onLookup: (outcome) => metrics.workCopies.inc({ outcome }),
  });
  // Each vendor's rate limits, one budget every worker shares (docs/decisions.md, "Vendor quotas").
  const budget = await vendorBudgetFromConfig(config);
  let budgetOutageLoggedAt = 0;
  const onBudgetOutage = (err: Error) => {
    // Fail open, said at most every 30 s: the vendors' own 429s still bound the calls.
    if (Date.now() - budgetOutageLoggedAt < 30_000) return;
    budgetOutageLoggedAt = Date.now();
    log(`vendor budget unavailable, vendor calls go unpaced until Redis answers: ${err.message}`);
  };
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS });
  // Bundled once for both workers (Worker.create bundles the same way from workflowsPath).
  const workflowBundle = opts.workflowBundle ?? (await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: Runtime.instance().logger }));
  const shared = {
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    workflowBundle,
    activities: createActivities({ config, db, blobs, vision, metrics, workCopies, budget, onBudgetOutage, ...(opts.fetchPolicy ? { fetchPolicy: opts.fetchPolicy } : {}) }),
    interceptors: { activity: [activityCpuInterceptor(metrics)] },
    maxConcurrentActivityTaskExecutions: opts.activitySlots ?? ACTIVITY_SLOTS,
    shutdownGraceTime: config.SHUTDOWN_GRACE_MS,
    shutdownForceTime: config.SHUTDOWN_GRACE_MS + FORCE_AFTER_GRACE_MS,
  };
  // Batch children run on their parent's queue and every activity on its workflow's, so which
  // worker runs a task is decided once, where the API starts the workflow.
  const worker = await Worker.create({ ...shared, taskQueue: config.TEMPORAL_TASK_QUEUE });
  const interactive = await Worker.create({ ...shared, taskQueue: interactiveTaskQueue(config) });
  let metricsServer: MetricsServer | null = null;
  if (config.WORKER_METRICS_PORT !== undefined) {
    metricsServer = await startMetricsServer(metrics.registry, { host: config.WORKER_METRICS_HOST, port: config.WORKER_METRICS_PORT });
    log(`metrics at ${metricsServer.url}`);
  }
  const sweepEvery = opts.sweepIntervalMs ?? 30_000;
  const sweeper = setInterval(() => void sweepOnce(db, metrics, log), sweepEvery);
  sweeper.unref();
  // Uploads unused past UPLOAD_TTL_MS expire first; their blobs are then the collector's like any other.
  // The worker only sweeps expired uploads; it takes none, so it has no finished upload to announce.
  const uploads = createUploads({ db, blobs, config, onSettled: async () => {} });
  const collector = setInterval(
    () =>
      void uploads
        .sweep()
        .then((n) => n && log(`upload collector expired ${n} unused upload(s)`))
        .then(() => collectBlobs(db, blobs, { graceMs: config.BLOB_GC_GRACE_MS, metrics, log }))
        .catch((err: Error) => log(`blob collector failed: ${err.message}`)),
    config.BLOB_GC_INTERVAL_MS,
  );
  collector.unref();
  const workers = [worker, interactive];
  const stopAll = () => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  };
  // One worker failing stops the other: the process runs both or neither.
  const runs = workers.map((w) =>
    w.run().catch((err: unknown) => {
      stopAll();
      throw err;
    }),
  );
  const done = Promise.allSettled(runs)
    .then((results) => {
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    })
    .finally(async () => {
      clearInterval(sweeper);
      clearInterval(collector);
      await metricsServer?.close().catch(() => {});
      await connection.close().catch(() => {});
      await budget.close().catch(() => {});
      await db.end().catch(() => {});
    });
  return {
    worker,
    interactive,
    done,
    metrics,
    metricsUrl: metricsServer?.url ?? null,
    async shutdown() {
      stopAll();
      await done;
    },
  };
}

/**
 * The SDK runtime of a worker process: its logs through pino, and, with
 * TEMPORAL_METRICS_BIND_ADDRESS, the SDK core's own Prometheus exporter. Prometheus naming:
 * counters end in `_total`, durations are histograms in seconds named with their unit
 * (`temporal_activity_execution_latency_seconds`).
 */
export function workerRuntimeOptions(config: Pick<Config, 'TEMPORAL_METRICS_BIND_ADDRESS'>, logger: Logger): RuntimeOptions {
  const options: RuntimeOptions = { logger: new PinoTemporalLogger(logger) };
  if (config.TEMPORAL_METRICS_BIND_ADDRESS) {
    options.telemetryOptions = {
      metrics: {
        prometheus: { bindAddress: config.TEMPORAL_METRICS_BIND_ADDRESS, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true },
      },
    };
  }
  return options;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const logger = createLogger(config, 'worker');
  // Before any connection or worker exists: the runtime is created once, with these options.
  // SDK and activity logs as JSON lines; activity lines carry workflowId and activityType.
  Runtime.install(workerRuntimeOptions(config, logger));
  if (config.TEMPORAL_METRICS_BIND_ADDRESS) logger.info(`Temporal SDK metrics at http://${config.TEMPORAL_METRICS_BIND_ADDRESS}/metrics`);
  const simulated = simulatorNotice(config);
  if (simulated) logger.warn(simulated);
  const running = await startWorker(config, { log: (m) => logger.info(m) });
  // Plain line kept on purpose: process supervisors and tests wait for it whatever LOG_LEVEL says.
  console.log(`[worker] polling task queue ${config.TEMPORAL_TASK_QUEUE} and ${interactiveTaskQueue(config)} on ${config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS}`);
  // The SDK's own SIGINT/SIGTERM handler stops polling and drains in-flight activities for
  // SHUTDOWN_GRACE_MS, then removes itself: these listeners keep a second signal (npm start
  // sends SIGTERM after the terminal's SIGINT) from killing the process mid-drain.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => logger.info({ signal, graceMs: config.SHUTDOWN_GRACE_MS }, 'signal received: no new tasks, draining in-flight activities'));
  }
  try {
    await running.done;
  } catch (err) {
    logger.error({ err }, 'worker stopped with an error');
    process.exit(1);
  }
  logger.info('worker shut down');
  process.exit(0);
}
