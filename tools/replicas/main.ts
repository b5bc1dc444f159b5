/**
 * `npm run replicas [-- --apis 2 --workers 2 --consoles 2]`: the replicated deployment as processes
 * on this machine (docs/deployment.md "Replicas"). Shares the Postgres and Redis of the
 * environment (the same defaults as `npm start`), starts what is missing — a Temporal dev server
 * on a free port (unless TEMPORAL_ADDRESS), versitygw as the shared bucket (unless BLOB_STORE=s3),
 * the vendor simulator (unless a vendor key is set), an SMTP catcher whose mail is printed here
 * (unless SMTP_URL) — then the replicas, each on its own port. Ctrl-C stops everything.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { interactiveTaskQueue, loadConfig } from '../../core/config.ts';
import { anyVendorKey } from '../../vendors/settings.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { startMailCatcher } from '../../web/mail.ts';
import { startS3Server } from '../scripts/s3-server.ts';
import { generateInternalSecret, localAuthSecret } from '../scripts/internal-secret.ts';
import { startTemporalDevServer } from '../scripts/temporal.ts';
import { ensureConsoleBuilt } from '../scripts/build-web.ts';
import { startSimVendor } from '../sim/index.ts';
import { ROOT } from '../chaos/processes.ts';
import { startTopology } from './topology.ts';

const { values } = parseArgs({ options: { apis: { type: 'string', default: '2' }, workers: { type: 'string', default: '2' }, consoles: { type: 'string', default: '2' } } });
const count = (name: string, v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 16) {
    console.error(`--${name} takes a whole number from 0 to 16, not ${v}`);
    process.exit(2);
  }
  return n;
};
// Checked before anything starts.
const sizes = { apis: count('apis', values.apis), workers: count('workers', values.workers), consoles: count('consoles', values.consoles) };
const config = loadConfig();
const dataDir = resolve(ROOT, config.DATA_DIR);
const say = (m: string) => console.log(`[replicas] ${m}`);
const stops: Array<() => Promise<unknown>> = [];
const env: NodeJS.ProcessEnv = { ...process.env };

let stopping = false;
const stopAll = async (code: number) => {
  if (stopping) return;
  stopping = true;
  for (const stop of stops) await stop().catch((e: Error) => say(`stop failed: ${e.message}`));
  process.exit(code);
};
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

try {
  await createDatabaseIfMissing(config.DATABASE_URL);
  await migrate(config.DATABASE_URL);
  if (!config.TEMPORAL_ADDRESS) {
    const temporal = await startTemporalDevServer({ namespace: config.TEMPORAL_NAMESPACE, dbFile: join(dataDir, 'replicas/temporal.sqlite'), logFile: join(dataDir, 'replicas/temporal.log') });
    stops.push(() => temporal.stop());
    env.TEMPORAL_ADDRESS = temporal.address;
  }
  if (config.BLOB_STORE !== 's3') {
    // Kept under DATA_DIR like the database it goes with: photos taken in by one run are there for the next.
    const dir = join(dataDir, 'replicas/s3');
    const keysFile = join(dir, 'keys.json');
    const keys = existsSync(keysFile)
      ? (JSON.parse(readFileSync(keysFile, 'utf8')) as { accessKeyId: string; secretAccessKey: string })
      : { accessKeyId: `lenstack${randomBytes(4).toString('hex')}`, secretAccessKey: randomBytes(24).toString('hex') };
    mkdirSync(dir, { recursive: true });
    writeFileSync(keysFile, JSON.stringify(keys), { mode: 0o600 });
    const s3 = await startS3Server({ dir, ...keys });
    stops.push(() => s3.stop());
    const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
    await client.send(new CreateBucketCommand({ Bucket: 'lenstack-blobs' })).catch((err: { name?: string }) => {
      if (err.name !== 'BucketAlreadyOwnedByYou' && err.name !== 'BucketAlreadyExists') throw err;
    });
    client.destroy();
    Object.assign(env, { BLOB_STORE: 's3', S3_BUCKET: 'lenstack-blobs', S3_ENDPOINT: s3.endpoint, S3_FORCE_PATH_STYLE: 'true', S3_REGION: 'us-east-1', S3_ACCESS_KEY_ID: s3.accessKeyId, S3_SECRET_ACCESS_KEY: s3.secretAccessKey });
  }
  if (!config.SIM_VENDOR_URL && !anyVendorKey(config)) {
    const sim = await startSimVendor({ port: 0 });
    stops.push(() => sim.close());
    env.SIM_VENDOR_URL = sim.url;
    say(`no vendor key: analyses come from the vendor SIMULATOR at ${sim.url}`);
  }
  if (!config.SMTP_URL) {
    const mail = await startMailCatcher();
    stops.push(() => mail.close());
    env.SMTP_URL = mail.url;
    let shown = 0;
    const show = setInterval(() => {
      for (const m of mail.messages().filter((m) => m.id > shown)) {
        shown = m.id;
        say(`mail to ${m.to.join(', ')}: ${m.subject}\n${m.text}`);
      }
    }, 500);
    stops.push(async () => clearInterval(show));
  }
  env.INTERNAL_SECRET ??= generateInternalSecret(dataDir).secret;
  env.AUTH_SECRET ??= localAuthSecret(dataDir).secret;
  await ensureConsoleBuilt();

  const topology = await startTopology({ ...sizes, env, logDir: join(dataDir, 'replicas') });
  stops.unshift(() => topology.stop());
  for (const r of [...topology.apis, ...topology.consoles]) say(`${r.name} on ${r.url}`);
  say(`${topology.workers.length} worker(s) polling ${config.TEMPORAL_TASK_QUEUE} and ${interactiveTaskQueue(config)}; logs in ${join(dataDir, 'replicas')}`);
} catch (err) {
  // Whatever started is stopped: no orphaned versitygw, Temporal or replica.
  say(`could not start: ${err instanceof Error ? err.message : String(err)}`);
  await stopAll(1);
}
