/**
 * npm run chaos -- [--seed S] [--calls N] [--clients N] [--users N] [--duration SECONDS] [--workers N]
 *                  [--api-kills N] [--temporal-kills N] [--pg-restarts N] [--console-kills N] [--outage SECONDS]
 *                  [--batches N] [--keep]
 *
 * The chaos suite at full size: its own Postgres cluster (initdb into the run directory with the
 * machine's /usr/lib/postgresql/<version>/bin, on a free port), its own Temporal dev server with
 * its state in a file, a Redis prefix, task queue and blob directory, all removed afterwards
 * (--keep leaves the run directory .data/chaos/<run>/ with every process's log). The run restarts
 * its Postgres and Temporal, so it never uses the machine's: only Redis must run (127.0.0.1:6379
 * unless REDIS_URL says otherwise). Prints the figures; exits 1 when any check fails.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createClient } from 'redis';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { loadConfig } from '../../core/config.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { PrivatePostgres, RestartableTemporal } from './infra.ts';
import { FULL_SIZE, runChaos, type ChaosOptions } from './driver.ts';
import { ROOT } from './processes.ts';

const USAGE = `usage: npm run chaos -- [--seed S] [--calls ${FULL_SIZE.calls}] [--clients ${FULL_SIZE.clients}] [--users ${FULL_SIZE.users}] [--duration ${FULL_SIZE.durationMs / 1000}] [--workers ${FULL_SIZE.workers}] [--api-kills ${FULL_SIZE.apiKills}] [--temporal-kills ${FULL_SIZE.temporalKills}] [--pg-restarts ${FULL_SIZE.pgRestarts}] [--console-kills ${FULL_SIZE.consoleKills}] [--batches ${FULL_SIZE.batches}] [--outage ${FULL_SIZE.temporalOutageMs / 1000}] [--keep]`;

function parseOptions(argv: string[]): { options: Partial<ChaosOptions> & { seed: string }; keep: boolean } {
  const fail = (message: string): never => {
    console.error(`${message}\n${USAGE}`);
    process.exit(2);
  };
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        seed: { type: 'string', default: '1' },
        calls: { type: 'string' },
        clients: { type: 'string' },
        users: { type: 'string' },
        duration: { type: 'string' },
        workers: { type: 'string' },
        'api-kills': { type: 'string' },
        'temporal-kills': { type: 'string' },
        'pg-restarts': { type: 'string' },
        'console-kills': { type: 'string' },
        batches: { type: 'string' },
        outage: { type: 'string' },
        keep: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    return fail((err as Error).message);
  }
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  if (!values.seed) fail('--seed needs a value');
  const int = (name: 'calls' | 'clients' | 'users' | 'duration' | 'workers' | 'api-kills' | 'temporal-kills' | 'pg-restarts' | 'console-kills' | 'batches' | 'outage', min = 1): number | undefined => {
    const v = values[name];
    if (v === undefined) return undefined;
    const n = Number(v);
    return Number.isInteger(n) && n >= min && n <= 100_000 ? n : fail(`--${name} needs an integer ≥ ${min}`);
  };
  const options: Partial<ChaosOptions> & { seed: string } = { seed: values.seed };
  for (const name of ['calls', 'clients', 'users', 'workers'] as const) {
    const n = int(name);
    if (n !== undefined) options[name] = n;
  }
  const duration = int('duration');
  if (duration !== undefined) options.durationMs = duration * 1000;
  const apiKills = int('api-kills', 0);
  if (apiKills !== undefined) options.apiKills = apiKills;
  const temporalKills = int('temporal-kills', 0);
  if (temporalKills !== undefined) options.temporalKills = temporalKills;
  const pgRestarts = int('pg-restarts', 0);
  if (pgRestarts !== undefined) options.pgRestarts = pgRestarts;
  const consoleKills = int('console-kills', 0);
  if (consoleKills !== undefined) options.consoleKills = consoleKills;
  const batches = int('batches', 0);
  if (batches !== undefined) options.batches = batches;
  const outage = int('outage', 0);
  if (outage !== undefined) {
    options.temporalOutageMs = outage * 1000;
    // A run the outage delays must outlive it (see FULL_SIZE.workflowTimeoutMs).
    options.workflowTimeoutMs = Math.max(FULL_SIZE.workflowTimeoutMs, (outage + 60) * 1000);
    options.reservationTtlMs = options.workflowTimeoutMs + 10_000;
  }
  return { options, keep: values.keep };
}

const { options, keep } = parseOptions(process.argv.slice(2));
const config = loadConfig();
Runtime.install({ logger: new DefaultLogger('ERROR') });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

const runId = `${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}-${process.pid}-${randomBytes(2).toString('hex')}`;
const runDir = path.join(ROOT, '.data/chaos', runId);
await mkdir(runDir, { recursive: true });
const redisPrefix = `lenstack-chaos:${runId}:`;

let postgres: PrivatePostgres | undefined;
let temporal: RestartableTemporal | undefined;
let exitCode = 1;
try {
  [postgres, temporal] = await Promise.all([
    PrivatePostgres.start({ parentDir: runDir }),
    RestartableTemporal.start({ dir: path.join(runDir, 'temporal'), namespace: config.TEMPORAL_NAMESPACE }),
  ]);
  const databaseUrl = postgres.url('lenstack_chaos');
  await createDatabaseIfMissing(databaseUrl);
  await migrate(databaseUrl);
  console.log(`[chaos] private Postgres on :${postgres.port} (${postgres.dataDir}), Temporal on ${temporal.address} (${temporal.dbFile})`);
  const report = await runChaos(
    {
      databaseUrl,
      redisUrl: config.REDIS_URL,
      redisPrefix,
      temporalAddress: temporal.address,
      temporalNamespace: config.TEMPORAL_NAMESPACE,
      taskQueue: `chaos-${runId}`,
      blobDir: path.join(runDir, 'blobs'),
      runDir,
      postgres,
      temporalServer: temporal,
    },
    { ...FULL_SIZE, ...options, log: (line) => console.log(`[chaos] ${line}`) },
  );
  console.log(['', '='.repeat(100), ...report.lines, '='.repeat(100)].join('\n'));
  exitCode = report.ok ? 0 : 1;
} catch (err) {
  console.error(`[chaos] the run itself failed: ${(err as Error).stack ?? String(err)}`);
} finally {
  await temporal?.close().catch(() => {});
  const redis = createClient({ url: config.REDIS_URL, socket: { connectTimeout: 5_000, reconnectStrategy: false } });
  redis.on('error', () => {});
  await redis
    .connect()
    .then(async () => {
      for await (const keys of redis.scanIterator({ MATCH: `${redisPrefix}*`, COUNT: 500 })) if (keys.length) await redis.unlink(keys);
      redis.destroy();
    })
    .catch(() => {});
  if (keep) {
    await postgres?.stopImmediate().catch(() => {});
    console.log(`[chaos] kept ${runDir} (Postgres data in ${postgres?.dataDir}, Temporal state in ${temporal?.dbFile})`);
  } else {
    await postgres?.close().catch((err: Error) => console.error(`[chaos] could not remove the private Postgres: ${err.message}`));
    await rm(path.join(runDir, 'temporal'), { recursive: true, force: true });
    await rm(path.join(runDir, 'blobs'), { recursive: true, force: true });
    await rm(path.join(runDir, 'workflow-bundle.js'), { force: true });
  }
}
process.exit(exitCode);
