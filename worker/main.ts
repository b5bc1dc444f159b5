import { fileURLToPath, pathToFileURL } from 'node:url';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { loadConfig, type Config } from '../core/config.ts';
import { sweepExpired } from '../credits/ledger.ts';
import { createPool } from '../db/pool.ts';
import { FsBlobStore } from '../images/blobstore.ts';
import { createVisionClients } from '../vendors/index.ts';
import type { Vendor } from '../workflows/types.ts';
import type { VisionClient } from '../vendors/types.ts';
import { createActivities } from '../activities/index.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from './address.ts';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface RunningWorker {
  worker: Worker;
  /** Resolves when the worker has shut down. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Build the worker's dependencies once and start polling. A sweeper in the same process releases
 * reservations whose workflow died unfinished (terminated, timed out) once they expire.
 */
export async function startWorker(
  config: Config,
  opts: { workflowBundle?: WorkflowBundle; sweepIntervalMs?: number; log?: (msg: string) => void } = {},
): Promise<RunningWorker> {
  const log = opts.log ?? ((m: string) => console.log(`[worker] ${m}`));
  const db = createPool(config.DATABASE_URL, { application: 'lenstack-worker' });
  const { clients, warnings } = createVisionClients(config);
  for (const w of warnings) log(w);
  const vision = new Map<Vendor, VisionClient>(clients.map((c) => [c.vendor, c]));
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS });
  const worker = await Worker.create({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities({ config, db, blobs: new FsBlobStore(config.BLOB_DIR), vision }),
    maxConcurrentActivityTaskExecutions: 100,
    shutdownGraceTime: '10 seconds',
  });
  const sweepEvery = opts.sweepIntervalMs ?? 30_000;
  const sweeper = setInterval(() => {
    sweepExpired(db)
      .then((ids) => ids.length && log(`sweeper released ${ids.length} expired reservation(s)`))
      .catch((err: Error) => log(`sweeper failed: ${err.message}`));
  }, sweepEvery);
  sweeper.unref();
  const done = worker.run().finally(async () => {
    clearInterval(sweeper);
    await connection.close().catch(() => {});
    await db.end().catch(() => {});
  });
  return {
    worker,
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const running = await startWorker(config);
  console.log(`[worker] polling task queue ${config.TEMPORAL_TASK_QUEUE} on ${config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS}`);
  // The SDK installs its own SIGINT/SIGTERM handlers that drain in-flight activities.
  await running.done;
  process.exit(0);
}
