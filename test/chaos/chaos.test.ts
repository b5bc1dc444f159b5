import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runChaos, FULL_SIZE, type ChaosOptions } from '../../tools/chaos/driver.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../../db/migrate.ts';
import { testConfig } from '../harness/env.ts';

/**
 * The chaos suite (chaos/, `npm run chaos` at full size) at CI size: 150 calls from 10 clients
 * across 10 users, through 2 real API processes and 2 real worker processes that are SIGKILLed and
 * restarted, with Postgres and Redis connections reset and stalled by the fault proxies and the
 * simulated vendors failing 30% of calls. Its own database: the run's workers sweep every
 * expired reservation they see every 2 s, which must not race other files' sweeper tests.
 */
const CI_SIZE: Omit<ChaosOptions, 'log'> = {
  ...FULL_SIZE,
  seed: 'ci',
  calls: 150,
  clients: 10,
  users: 10,
  durationMs: 100_000,
  workers: 2,
  // The load takes ~10 s on a quiet machine: kills come often enough that at least two land in it.
  killEveryMs: [2_000, 3_500],
  apiFaults: 'kill',
  stallBurstChance: 0.5,
  // Short, so a timed-out workflow's reservation expires seconds after the load ends.
  workflowTimeoutMs: 20_000,
  reservationTtlMs: 22_000,
  images: 30,
  clientTimeoutMs: 40_000,
};

let databaseUrl: string;
let runDir: string;
beforeAll(async () => {
  const url = new URL(testConfig().DATABASE_URL);
  url.pathname = `${url.pathname}_chaos_${randomBytes(3).toString('hex')}`;
  databaseUrl = url.toString();
  await createDatabaseIfMissing(databaseUrl);
  await migrate(databaseUrl);
  runDir = await mkdtemp(path.join(tmpdir(), 'lenstack-chaos-'));
}, 60_000);

afterAll(async () => {
  if (runDir) await rm(runDir, { recursive: true, force: true });
  if (!databaseUrl) return;
  await dropDatabase(databaseUrl);
}, 60_000);

describe('chaos (CI size)', () => {
  it('every request answered, every credit accounted for, while workers, APIs, Postgres, Redis and vendors fail', async () => {
    const config = testConfig();
    const report = await runChaos(
      {
        databaseUrl,
        redisUrl: config.REDIS_URL,
        redisPrefix: `${config.REDIS_PREFIX}chaos:`,
        temporalAddress: config.TEMPORAL_ADDRESS!,
        temporalNamespace: config.TEMPORAL_NAMESPACE,
        taskQueue: `${config.TEMPORAL_TASK_QUEUE}-chaos`,
        blobDir: config.BLOB_DIR,
        runDir,
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
  }, 240_000);
});
