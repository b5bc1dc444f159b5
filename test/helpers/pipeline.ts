import { readFile } from 'node:fs/promises';
import { bundleWorkflowCode, DefaultLogger, Runtime, type WorkflowBundle } from '@temporalio/worker';
import { inject } from 'vitest';
import { Client } from '@temporalio/client';
import { IllegalStateError } from '@temporalio/common';
import { connectTemporal } from '../../core/temporal-connection.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { noRateLimits } from './deps.ts';
import { buildApp } from '../../api/app.ts';
import { KeyCache } from '../../auth/cache.ts';
import type { Config } from '../../core/config.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { startSimVendor } from '../../tools/sim/index.ts';
import { startWorker, WORKFLOWS_PATH, type RunningWorker } from '../../worker/main.ts';
import { PUBLIC_INTERNET, type FetchPolicy } from '../../images/fetch.ts';
import type { AppDeps } from '../../api/deps.ts';
import { testConfig, type ConfigOverrides } from '../harness/env.ts';
import { INTERNAL_SECRET } from './app.ts';
import type { FastifyInstance } from 'fastify';

/** Activity failures we provoke on purpose are logged by the SDK at WARN: keep test output readable. */
export function quietTemporal(): void {
  // The runtime is one per process, and a process runs file after file (fresh-modules.ts): the
  // first call installs it; later ones, or a worker an earlier file started first, find it made.
  try {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  } catch (err) {
    if (!(err instanceof IllegalStateError)) throw err;
  }
}

let bundle: Promise<WorkflowBundle> | undefined;
/**
 * The workflow code, bundled once for the whole run by the harness (webpack takes seconds of CPU,
 * and ~60 test files start workers), read once per test file. When the harness could not bundle
 * it, the file bundles it itself, so the bundler's error shows in the tests that need it.
 */
export function workflowBundle(): Promise<WorkflowBundle> {
  const path = inject('workflowBundlePath');
  bundle ??= path
    ? readFile(path, 'utf8').then((code) => ({ code }))
    : bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} } as never });
  return bundle;
}

export type Sim = Awaited<ReturnType<typeof startSimVendor>>;

export interface Pipeline {
  app: FastifyInstance;
  config: Config;
  db: Db;
  sim: Sim;
  temporal: Client;
  worker: RunningWorker | null;
  startWorker(): Promise<RunningWorker>;
  close(): Promise<void>;
}

/**
 * The whole analyze path for tests: the simulated vendor server (real SDKs talk to it over HTTP),
 * a real worker on this file's task queue, the real app with a real Temporal client.
 */
export async function startPipeline(
  opts: { config?: ConfigOverrides; worker?: boolean; fetchPolicy?: FetchPolicy; deps?: Partial<AppDeps> } = {},
): Promise<Pipeline> {
  quietTemporal();
  const sim = await startSimVendor({ port: 0 });
  const config = testConfig({ INTERNAL_SECRET, SIM_VENDOR_URL: sim.url, ...opts.config });
  const db = createPool(config.DATABASE_URL, { max: 10 });
  const connection = await connectTemporal(config.TEMPORAL_ADDRESS!);
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const app = await buildApp({
    config,
    db,
    keyCache: new KeyCache(),
    blobs: blobStoreFromConfig(config),
    temporal,
    fetchPolicy: opts.fetchPolicy ?? PUBLIC_INTERNET,
    rateLimiter: noRateLimits,
    metrics: createApiMetrics(),
    ...opts.deps,
  });
  await app.ready();
  const p: Pipeline = {
    app,
    config,
    db,
    sim,
    temporal,
    worker: null,
    async startWorker() {
      const w = await startWorker(config, { workflowBundle: await workflowBundle(), log: () => {}, ...(opts.fetchPolicy ? { fetchPolicy: opts.fetchPolicy } : {}) });
      p.worker = w;
      return w;
    },
    async close() {
      await p.worker?.shutdown().catch(() => {});
      await app.close();
      await connection.close();
      await db.end();
      await sim.close();
    },
  };
  if (opts.worker !== false) await p.startWorker();
  return p;
}
