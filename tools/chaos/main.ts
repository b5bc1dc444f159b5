/**
 * npm run chaos -- [--seed S] [--calls N] [--clients N] [--users N] [--duration SECONDS] [--workers N] [--keep]
 *
 * The chaos suite at full size: its own database, Temporal dev server, Redis prefix,
 * task queue and blob directory, all removed afterwards (--keep leaves the database and the run
 * directory .data/chaos/<run>/ with every process's log). Prints the figures; exits 1 when any
 * check fails. Postgres and Redis must run (127.0.0.1:5432 and :6379 unless DATABASE_URL /
 * REDIS_URL say otherwise); TEMPORAL_ADDRESS points at an existing Temporal instead of a dev server.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createClient } from 'redis';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { loadConfig } from '../../core/config.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../../db/migrate.ts';
import { startTemporalDevServer, type DevServer } from '../scripts/temporal.ts';
import { FULL_SIZE, runChaos, type ChaosOptions } from './driver.ts';
import { ROOT } from './processes.ts';

const USAGE = `usage: npm run chaos -- [--seed S] [--calls ${FULL_SIZE.calls}] [--clients ${FULL_SIZE.clients}] [--users ${FULL_SIZE.users}] [--duration ${FULL_SIZE.durationMs / 1000}] [--workers ${FULL_SIZE.workers}] [--keep]`;

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
  const int = (name: 'calls' | 'clients' | 'users' | 'duration' | 'workers'): number | undefined => {
    const v = values[name];
    if (v === undefined) return undefined;
    const n = Number(v);
    return Number.isInteger(n) && n >= 1 ? n : fail(`--${name} needs an integer ≥ 1`);
  };
  const options: Partial<ChaosOptions> & { seed: string } = { seed: values.seed };
  for (const name of ['calls', 'clients', 'users', 'workers'] as const) {
    const n = int(name);
    if (n !== undefined) options[name] = n;
  }
  const duration = int('duration');
  if (duration !== undefined) options.durationMs = duration * 1000;
  return { options, keep: values.keep };
}

const { options, keep } = parseOptions(process.argv.slice(2));
const config = loadConfig();
Runtime.install({ logger: new DefaultLogger('ERROR') });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

const runId = `${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}-${process.pid}-${randomBytes(2).toString('hex')}`;
const runDir = path.join(ROOT, '.data/chaos', runId);
await mkdir(runDir, { recursive: true });
const dbUrl = new URL(config.DATABASE_URL);
dbUrl.pathname = `/lenstack_chaos_${runId.replace(/-/g, '_').toLowerCase()}`;
const databaseUrl = dbUrl.toString();
const redisPrefix = `lenstack-chaos:${runId}:`;

let temporal: DevServer | undefined;
let exitCode = 1;
try {
  await createDatabaseIfMissing(databaseUrl);
  await migrate(databaseUrl);
  temporal = config.TEMPORAL_ADDRESS ? undefined : await startTemporalDevServer({ namespace: config.TEMPORAL_NAMESPACE });
  const report = await runChaos(
    {
      databaseUrl,
      redisUrl: config.REDIS_URL,
      redisPrefix,
      temporalAddress: config.TEMPORAL_ADDRESS ?? temporal!.address,
      temporalNamespace: config.TEMPORAL_NAMESPACE,
      taskQueue: `chaos-${runId}`,
      blobDir: path.join(runDir, 'blobs'),
      runDir,
    },
    { ...FULL_SIZE, ...options, log: (line) => console.log(`[chaos] ${line}`) },
  );
  console.log(['', '='.repeat(100), ...report.lines, '='.repeat(100)].join('\n'));
  exitCode = report.ok ? 0 : 1;
} catch (err) {
  console.error(`[chaos] the run itself failed: ${(err as Error).stack ?? String(err)}`);
} finally {
  await temporal?.stop().catch(() => {});
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
    console.log(`[chaos] kept database ${dbUrl.pathname.slice(1)} and ${runDir}`);
  } else {
    await dropDatabase(databaseUrl).catch((err: Error) => console.error(`[chaos] could not drop ${dbUrl.pathname.slice(1)}: ${err.message}`));
    await rm(path.join(runDir, 'blobs'), { recursive: true, force: true });
    await rm(path.join(runDir, 'workflow-bundle.js'), { force: true });
  }
}
process.exit(exitCode);
