/**
 * `npm run replicas [-- --apis 2 --workers 2 --consoles 2]`: the replicated deployment as processes
 * on this machine (docs/deployment.md "Replicas"). Shares the Postgres and Redis of the
 * environment (the same defaults as `npm start`), starts what is missing — a Temporal dev server
 * on a free port (unless TEMPORAL_ADDRESS), versitygw as the shared bucket (unless BLOB_STORE=s3),
 * the vendor simulator (unless a vendor key is set), an SMTP catcher whose mail is printed here
 * (unless SMTP_URL) — then the replicas, each on its own port. Ctrl-C stops everything.
 */
import { parseArgs } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { loadConfig } from '../../core/config.ts';
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
  if (!Number.isInteger(n) || n < 0 || n > 16) throw new Error(`--${name} takes a whole number from 0 to 16, not ${v}`);
  return n;
};
const config = loadConfig();
const say = (m: string) => console.log(`[replicas] ${m}`);
const stops: Array<() => Promise<unknown>> = [];
const env: NodeJS.ProcessEnv = { ...process.env };

await createDatabaseIfMissing(config.DATABASE_URL);
await migrate(config.DATABASE_URL);
if (!config.TEMPORAL_ADDRESS) {
  const temporal = await startTemporalDevServer({ namespace: config.TEMPORAL_NAMESPACE, logFile: `${ROOT}.data/replicas/temporal.log` });
  stops.push(() => temporal.stop());
  env.TEMPORAL_ADDRESS = temporal.address;
}
if (config.BLOB_STORE !== 's3') {
  const s3 = await startS3Server();
  stops.push(() => s3.stop());
  const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
  await client.send(new CreateBucketCommand({ Bucket: 'lenstack-blobs' }));
  client.destroy();
  Object.assign(env, { BLOB_STORE: 's3', S3_BUCKET: 'lenstack-blobs', S3_ENDPOINT: s3.endpoint, S3_FORCE_PATH_STYLE: 'true', S3_REGION: 'us-east-1', S3_ACCESS_KEY_ID: s3.accessKeyId, S3_SECRET_ACCESS_KEY: s3.secretAccessKey });
}
if (!config.SIM_VENDOR_URL && !(config.OPENAI_API_KEY || config.ANTHROPIC_API_KEY || config.GEMINI_API_KEY)) {
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
env.INTERNAL_SECRET ??= generateInternalSecret(`${ROOT}.data`).secret;
env.AUTH_SECRET ??= localAuthSecret(`${ROOT}.data`).secret;
await ensureConsoleBuilt();

const topology = await startTopology({
  apis: count('apis', values.apis),
  workers: count('workers', values.workers),
  consoles: count('consoles', values.consoles),
  env,
  logDir: `${ROOT}.data/replicas`,
});
stops.unshift(() => topology.stop());
for (const r of [...topology.apis, ...topology.consoles]) say(`${r.name} on ${r.url}`);
say(`${topology.workers.length} worker(s) polling ${config.TEMPORAL_TASK_QUEUE}; logs in .data/replicas/`);

let stopping = false;
const stopAll = async () => {
  if (stopping) return;
  stopping = true;
  for (const stop of stops) await stop().catch((e: Error) => say(`stop failed: ${e.message}`));
  process.exit(0);
};
process.on('SIGINT', () => void stopAll());
process.on('SIGTERM', () => void stopAll());
