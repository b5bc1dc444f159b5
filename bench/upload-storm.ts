/**
 * 20 concurrent ~90 MB uploads against one API process, side by side in one run: without a bound
 * on body bytes in flight (BODY_BYTES_IN_FLIGHT set past any storm: the behaviour before the
 * bound) and with the default bound. The uploads use a sandbox key, which parses the whole body
 * before answering. During each storm GET /v1/health is polled every 100 ms. Prints, per mode, the
 * upload statuses, health latency, whether the API survived and its peak RSS.
 *   npx tsx bench/upload-storm.ts        (Postgres and Redis on 127.0.0.1; writes bench/results/upload-storm.txt)
 * Traffic goes to 127.0.0.1 only; every request loop is bounded.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { loadConfig } from '../core/config.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const UPLOADS = 20;
const BODY_MB = 90;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

const base = loadConfig();
const dbUrl = new URL(base.DATABASE_URL);
dbUrl.pathname = `/lenstack_storm_${randomBytes(4).toString('hex')}`;
await createDatabaseIfMissing(dbUrl.toString());
await migrate(dbUrl.toString());
const db = createPool(dbUrl.toString(), { max: 2 });
const { accountId } = await createBillingAccount(db, `storm-${Date.now()}@example.com`);
const { key } = await issueKey(db, accountId, 'test');
await db.end();
const blobDir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-storm-'));

// One body, sent 20 times: a JSON analyze request whose base64 image is ~90 MB of text.
const image = randomBytes(Math.floor((BODY_MB * 1024 * 1024 * 3) / 4)).toString('base64');
const body = Buffer.from(JSON.stringify({ imageBase64: image, modules: ['dating'] }));

interface Api {
  port: number;
  memory(): Promise<{ rss: number; maxRss: number }>;
  alive(): boolean;
  stop(): Promise<void>;
}

async function startApi(env: Record<string, string>): Promise<Api> {
  const child = fork(path.join(ROOT, 'bench/upload-storm-api.ts'), [], {
    cwd: ROOT,
    execArgv: ['--import', 'tsx'],
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: dbUrl.toString(), REDIS_URL: base.REDIS_URL, REDIS_PREFIX: `storm-${process.pid}:`, BLOB_DIR: blobDir, LOG_LEVEL: 'silent', MAX_BODY_BYTES: String(100 * 1024 * 1024), ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let exited = false;
  child.on('exit', () => (exited = true));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`API exited (${code}) before it was ready`)));
  });
  return {
    port,
    alive: () => !exited,
    memory: () =>
      new Promise((resolve) => {
        child.once('message', (m: { rss: number; maxRss: number }) => resolve(m));
        child.send({ type: 'memory' });
      }),
    stop: async () => {
      if (exited) return;
      child.send({ type: 'stop' });
      await new Promise((r) => child.once('exit', r));
    },
  };
}

function upload(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/v1/analyze', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': body.length } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.setTimeout(120_000, () => req.destroy());
    req.on('error', () => resolve(0)); // 0: the connection failed (reset, refused, the API died)
    req.end(body);
  });
}

function health(port: number): Promise<number | null> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/v1/health', timeout: 10_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200 ? performance.now() - t0 : null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
    req.end();
  });
}

const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : NaN);

async function storm(name: string, env: Record<string, string>): Promise<void> {
  const api = await startApi(env);
  const idle = await api.memory();
  let storming = true;
  const healthMs: number[] = [];
  let healthFailed = 0;
  const poller = (async () => {
    for (let i = 0; storming && i < 3000; i++) {
      const ms = await health(api.port);
      if (ms === null) healthFailed++;
      else healthMs.push(ms);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const t0 = performance.now();
  const statuses = await Promise.all(Array.from({ length: UPLOADS }, () => upload(api.port)));
  const took = performance.now() - t0;
  storming = false;
  await poller;
  const alive = api.alive();
  const mem = alive ? await api.memory() : null;
  const counts = statuses.reduce<Record<string, number>>((m, s) => ((m[s === 0 ? 'connection failed' : String(s)] = (m[s === 0 ? 'connection failed' : String(s)] ?? 0) + 1), m), {});
  say(`## ${name}`);
  say(`uploads: ${UPLOADS} × ${(body.length / 1024 / 1024).toFixed(1)} MB at once, done in ${(took / 1000).toFixed(1)} s: ${Object.entries(counts).map(([k, v]) => `${v} × ${k}`).join(', ')}`);
  say(`GET /v1/health during the storm: ${healthMs.length} answered, ${healthFailed} failed; p50 ${pct(healthMs, 50).toFixed(1)} ms, max ${Math.max(...healthMs, 0).toFixed(1)} ms`);
  say(`API survived: ${alive ? 'yes' : 'NO'}; RSS idle ${(idle.rss / 1024 / 1024).toFixed(0)} MB, peak ${mem ? (mem.maxRss / 1024 / 1024).toFixed(0) : '?'} MB`);
  say('');
  await api.stop();
}

try {
  say(`# Upload storm (${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
  say('');
  await storm('no bound on body bytes in flight (BODY_BYTES_IN_FLIGHT = 100 GiB: the behaviour before the bound)', { BODY_BYTES_IN_FLIGHT: String(100 * 1024 ** 3) });
  await storm('the default bound (BODY_BYTES_IN_FLIGHT = 400 MiB)', {});
  await mkdir(path.join(ROOT, 'bench/results'), { recursive: true });
  await writeFile(path.join(ROOT, 'bench/results/upload-storm.txt'), `${lines.join('\n')}\n`);
} finally {
  await rm(blobDir, { recursive: true, force: true });
  await dropDatabase(dbUrl.toString());
}
