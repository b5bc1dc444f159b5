import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runChaos, FULL_SIZE, type ChaosOptions } from '../../tools/chaos/driver.ts';
import { PrivatePostgres, RestartableTemporal } from '../../tools/chaos/infra.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { testConfig } from '../harness/env.ts';

/**
 * The chaos suite (chaos/, `npm run chaos` at full size) at CI size: 150 calls from 10 clients
 * across 10 users, through 2 real API processes and 2 real worker processes that are SIGKILLed and
 * restarted, with Postgres and Redis connections reset and stalled by the fault proxies and the
 * simulated vendors failing 30% of calls; and, once each: an API SIGKILLed with analyses in
 * flight and an upload's PATCH cut (finished through the other API), a console replica SIGKILLed
 * mid-upload (finished through the other console), Temporal SIGKILLed and restarted on its state
 * file, Postgres stopped with `pg_ctl -m immediate` and started, and a Temporal outage longer than
 * the API waits for it. The consoles reach Postgres and Redis through the same proxies, and a
 * signed-in person uses them throughout (2xx or 503 + Retry-After, never a 500). Beside the analyze clients, batch clients upload photos with tus and submit
 * photo and vehicle batches over them, and wait for each to end.
 * Its own Postgres cluster and Temporal server (it restarts both; other files use the shared
 * ones), so its workers' 2 s sweeper races no other file's sweeper tests either.
 */
const CI_SIZE: Omit<ChaosOptions, 'log'> = {
  ...FULL_SIZE,
  seed: 'ci',
  calls: 150,
  clients: 10,
  users: 10,
  // Bounds the load (the outage alone takes 30 s; a loaded machine makes everything slower).
  durationMs: 240_000,
  workers: 2,
  // Kills come often enough that at least two land in the load.
  killEveryMs: [2_000, 3_500],
  apiTerms: 0,
  apiKills: 1,
  consoleKills: 1,
  temporalKills: 1,
  pgRestarts: 1,
  pgDownMs: [1_000, 2_000],
  // Longer than the API's own wait for Temporal (5 s to start a workflow, ~20 s of gRPC retries
  // while awaiting one: analysis/await-workflow.ts), so callers see the outage's 503s.
  temporalOutageMs: 30_000,
  stallBurstChance: 0.5,
  // Longer than the outage (a run it delays finishes after it), short enough that a timed-out
  // workflow's reservation expires soon after the load ends.
  workflowTimeoutMs: 60_000,
  reservationTtlMs: 62_000,
  images: 30,
  clientTimeoutMs: 40_000,
  batches: 4,
  batchUsers: 2,
  batchClients: 2,
  consoles: 2,
};

let databaseUrl: string;
let runDir: string;
let postgres: PrivatePostgres;
let temporal: RestartableTemporal;
beforeAll(async () => {
  runDir = await mkdtemp(path.join(tmpdir(), 'lenstack-chaos-'));
  [postgres, temporal] = await Promise.all([
    PrivatePostgres.start(),
    RestartableTemporal.start({ dir: path.join(runDir, 'temporal'), namespace: testConfig().TEMPORAL_NAMESPACE }),
  ]);
  databaseUrl = postgres.url(`lenstack_chaos_${randomBytes(3).toString('hex')}`);
  await createDatabaseIfMissing(databaseUrl);
  await migrate(databaseUrl);
}, 180_000);

afterAll(async () => {
  await temporal?.close();
  await postgres?.close();
  if (runDir) await rm(runDir, { recursive: true, force: true });
}, 60_000);

describe('chaos (CI size)', () => {
  it('every request answered, every credit accounted for, while workers, APIs, Postgres, Redis and vendors fail', async () => {
    const config = testConfig();
    const report = await runChaos(
      {
        databaseUrl,
        redisUrl: config.REDIS_URL,
        redisPrefix: `${config.REDIS_PREFIX}chaos:`,
        temporalAddress: temporal.address,
        temporalNamespace: config.TEMPORAL_NAMESPACE,
        taskQueue: `${config.TEMPORAL_TASK_QUEUE}-chaos`,
        blobDir: config.BLOB_DIR,
        runDir,
        postgres,
        temporalServer: temporal,
      },
      { ...CI_SIZE, log: () => {} },
    );
    console.log(report.lines.join('\n'));
    expect(report.failures).toEqual([]);

    const f = report.figures;
    expect(f.sent).toBe(150);
    expect(f.answered).toBe(150);
    // The faults really happened.
    expect(f.workerKills).toBeGreaterThanOrEqual(2);
    expect(f.workerStarts).toBeGreaterThan(2);
    expect(f.apiKills).toBe(1);
    expect(f.restarts).toEqual({ 'api-kill': 1, 'console-kill': 1, 'temporal-kill': 1, 'pg-restart': 1, 'temporal-outage': 1 });
    expect(f.consoleKills).toBe(1);
    // A signed-in person used the consoles (behind the fault proxies) throughout the load.
    expect(f.consoleRequests['200']).toBeGreaterThan(20);
    // The upload cut by the API SIGKILL and the one cut by the console SIGKILL each finished
    // through the other replica, and their batches (with the plan's 4) ended.
    expect(f.resumedUploads).toBe(2);
    expect(Object.entries(f.batches).filter(([k]) => !/ (completed|cancelled)$/.test(k))).toEqual([]);
    expect(Object.values(f.batches).reduce((a, b) => a + b, 0)).toBe(4 + 2);
    expect(f.batchItems.pending).toBe(0);
    expect(f.batchItems.done).toBeGreaterThan(0);
    expect(postgres.restarts).toBe(1);
    expect(temporal.kills).toBe(2);
    // Callers during the outage were told to come back (503 with Retry-After, checked per answer).
    expect(f.duringOutage['503 SERVICE_UNAVAILABLE']).toBeGreaterThan(0);
    expect(f.duringOutage['500 INTERNAL_ERROR'] ?? 0).toBe(0);
    expect(f.missingBlobs).toBe(0);
    expect(f.terminated).toBe(0);
    expect(f.pgResets).toBeGreaterThanOrEqual(3);
    expect(f.redisResets).toBeGreaterThanOrEqual(1);
    expect(f.vendorFailures).toBeGreaterThan(0);
    expect(f.crashes).toBe(0);
    // Users ran out of credits and others were served.
    expect(f.outcomes['402 PLAN_LIMIT_EXCEEDED']).toBeGreaterThan(0);
    expect((f.outcomes['200 analyzed, charged'] ?? 0) + (f.outcomes['200 cache hit'] ?? 0)).toBeGreaterThan(30);
    // The books: nothing held, everything granted is a balance or a charge.
    expect(f.books.reserved).toBe(0);
    expect(f.books.openReservations).toBe(0);
    expect(f.books.granted).toBe(f.books.balances + f.books.charged);
    expect(f.books.settled).toBeGreaterThan(0);
    expect(f.workflows.RUNNING ?? 0).toBe(0);
  }, 420_000);
});
