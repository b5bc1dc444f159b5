import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../../core/config.ts';
import { checkInvariants, getBalance, type Balance } from '../../../credits/ledger.ts';
import type { Db } from '../../../db/pool.ts';
import { closeSharedMetadataTool } from '../../../enrich/exiftool.ts';
import type { FetchPolicy } from '../../../images/fetch.ts';
import { RateLimiter } from '../../../ratelimit/limiter.ts';
import { testConfig, type ConfigOverrides } from '../../harness/env.ts';
import { startPipeline, type Pipeline } from '../../helpers/pipeline.ts';
import { endpointOf, type Attempt } from './egress.ts';
import { LOADED_MACHINE_REDIS_MS } from '../../helpers/deps.ts';

/**
 * The real app and the real analysis pipeline, as api/server.ts and worker/main.ts build them:
 * real Postgres, Redis rate limits, blob store, exiftool, a real Temporal client on the harness's
 * dev server, a real worker on this file's task queue, and the real vendor SDKs talking to the
 * simulated vendor server (0 ms latency) over HTTP. A request that gets through every check runs
 * a real analysis and is billed for it.
 */

export interface HostileApp {
  app: FastifyInstance;
  config: Config;
  db: Db;
  pipeline: Pipeline;
  close(): Promise<void>;
}

export async function startHostileApp(
  opts: { config?: ConfigOverrides; fetchPolicy?: FetchPolicy; rateLimits?: boolean } = {},
): Promise<HostileApp> {
  const rateLimiter = opts.rateLimits ? await RateLimiter.connect(testConfig().REDIS_URL, { commandTimeoutMs: LOADED_MACHINE_REDIS_MS }) : undefined;
  const pipeline = await startPipeline({
    ...(opts.config ? { config: opts.config } : {}),
    ...(opts.fetchPolicy ? { fetchPolicy: opts.fetchPolicy } : {}),
    ...(rateLimiter ? { deps: { rateLimiter } } : {}),
  });
  return {
    app: pipeline.app,
    config: pipeline.config,
    db: pipeline.db,
    pipeline,
    async close() {
      await pipeline.close();
      await rateLimiter?.close();
      await closeSharedMetadataTool();
    },
  };
}

/**
 * Request ids (from workflow ids `analyze:<user>:<requestId>`) of the analyze workflows that ran on
 * `taskQueue`, from Temporal's visibility store. Visibility lags the workflows a little: polls
 * until the count stops short of `expected` no longer, bounded by `timeoutMs`.
 */
export async function analyzeWorkflowRequestIds(temporal: Client, taskQueue: string, expected: number, timeoutMs = 15_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ids: string[] = [];
    for await (const w of temporal.workflow.list({ query: `TaskQueue = '${taskQueue}' AND WorkflowType = 'analyzeWorkflow'` })) {
      ids.push(w.workflowId.split(':').slice(2).join(':'));
    }
    if (ids.length >= expected || Date.now() > deadline) return ids;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A user's books after real analyses: nothing left reserved, and the ledger agrees with the balances. */
export async function books(db: Db, accountId: string): Promise<{ reserved: number; problems: string[] }> {
  const balance = await getBalance(db, accountId);
  const problems = (await checkInvariants(db, accountId)).flatMap((r) => r.problems);
  return { reserved: balance.reserved, problems };
}

export interface Footprint {
  balance: Balance;
  ledgerRows: number;
  photos: number;
  lensRecords: number;
  lensEvents: number;
  reservations: number;
  bespokeSchemas: number;
  vehicleReports: number;
}

/** Everything a request could have changed for a user: balances, ledger and registry rows. */
export async function footprint(db: Db, accountId: string): Promise<Footprint> {
  const count = async (table: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE user_id = $1`, [accountId])).rows[0]!.n;
  return {
    balance: await getBalance(db, accountId),
    ledgerRows: await count('credit_ledger'),
    photos: await count('photos'),
    lensRecords: await count('lens_records'),
    lensEvents: await count('lens_events'),
    reservations: await count('reservations'),
    bespokeSchemas: await count('bespoke_schemas'),
    vehicleReports: await count('vehicle_reports'),
  };
}

/** Where the real pipeline connects on its own: the simulated vendor and the Temporal frontend. */
export function pipelineEndpoints(h: HostileApp): Attempt[] {
  return [endpointOf(h.pipeline.sim.url, 80), endpointOf(`http://${h.config.TEMPORAL_ADDRESS!}`, 7233)];
}
