/**
 * Peak memory of the API and of the worker, each its own process as `npm start` runs them, over a
 * 100-photo and an N-photo batch (npx tsx bench/batch-processes.ts [photos=1000]). Each batch gets
 * fresh API and worker processes; their peak RSS is the kernel's VmHWM, read from /proc just
 * before they stop. 800 ms simulated vendor latency, lens `dating`, distinct 320×240 photos.
 * Writes bench/results/batch-processes.txt.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { issueKey } from '../auth/repository.ts';
import { createUser } from '../accounts/billing-accounts.ts';
import { grant } from '../credits/ledger.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { freePort, startTemporalDevServer } from '../tools/scripts/temporal.ts';
import { startSimVendor } from '../tools/sim/index.ts';
import { distinctPhotos } from './distinct-photos.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const N = Number(process.argv[2] ?? 1000);
const LATENCY_MS = 800;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

const dbName = `lenstack_bench_batchp_${process.pid}`;
const blobDir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-bench-'));
const temporal = await startTemporalDevServer({});
const sim = await startSimVendor({ port: 0 });
const databaseUrl = `postgres://postgres@127.0.0.1:5432/${dbName}`;
await createDatabaseIfMissing(databaseUrl);
await migrate(databaseUrl);
const db = createPool(databaseUrl, { max: 5 });
const env = {
  ...process.env,
  NODE_ENV: 'development',
  DATABASE_URL: databaseUrl,
  TEMPORAL_ADDRESS: temporal.address,
  TEMPORAL_TASK_QUEUE: `bench-${process.pid}`,
  REDIS_PREFIX: `lenstack-bench-${process.pid}:`,
  BLOB_DIR: blobDir,
  SIM_VENDOR_URL: sim.url,
  LOG_LEVEL: 'warn',
  OPENAI_API_KEY: '',
  ANTHROPIC_API_KEY: '',
  GEMINI_API_KEY: '',
};
const hwmMb = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

function start(script: string, extra: Record<string, string>, ready: RegExp): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const on = (d: Buffer) => {
      out += d.toString();
      if (ready.test(out)) resolve(child);
    };
    child.stdout!.on('data', on);
    child.stderr!.on('data', on);
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}): ${out.slice(-1000)}`)));
  });
}
const stop = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null ? r() : (c.once('exit', () => r()), c.kill('SIGTERM'))));

try {
  const { userId } = await createUser(db, 'bench-batchp@example.test');
  const { key } = await issueKey(db, userId, 'live');
  await grant(db, { userId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
  sim.setBehaviour('all', { latencyMs: LATENCY_MS });

  const run = async (photos: string[]) => {
    const port = await freePort();
    const worker = await start('worker/main.ts', {}, /polling task queue/);
    const api = spawn(process.execPath, ['--import', 'tsx', 'api/server.ts'], { cwd: ROOT, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: 'ignore' });
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    while (!(await fetch(`${base}/v1/health`).then((r) => r.ok, () => false))) {
      if (api.exitCode !== null || Date.now() > deadline) throw new Error('the API did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/batches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ modules: ['dating'], items: photos.map((b, i) => ({ base64: b, name: `photo-${i}.jpg` })) }),
    });
    const batch = (await res.json()) as { id: string };
    if (res.status !== 202) throw new Error(`HTTP ${res.status}: ${JSON.stringify(batch)}`);
    for (;;) {
      const s = (await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: { authorization: `Bearer ${key}` } })).json()) as { status: string };
      if (s.status === 'completed') break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const ms = performance.now() - t0;
    const result = { ms, apiMb: hwmMb(api.pid!), workerMb: hwmMb(worker.pid!) };
    await stop(api);
    await stop(worker);
    return result;
  };

  say(`batch memory by process, ${new Date().toISOString().slice(0, 10)}, node ${process.version}; vendor latency ${LATENCY_MS} ms; fresh API and worker processes per batch; peak RSS = VmHWM`);
  const small = await run(await distinctPhotos(0, 100));
  const large = await run(await distinctPhotos(100, N));
  say(`100 photos: ${(small.ms / 1000).toFixed(1)} s; API peak ${small.apiMb.toFixed(0)} MB, worker peak ${small.workerMb.toFixed(0)} MB`);
  say(`${N} photos: ${(large.ms / 1000).toFixed(1)} s; API peak ${large.apiMb.toFixed(0)} MB, worker peak ${large.workerMb.toFixed(0)} MB`);
  say(`${N} / 100 photos: API ${(large.apiMb / small.apiMb).toFixed(2)}×, worker ${(large.workerMb / small.workerMb).toFixed(2)}× (target ≤ 1.5×)`);
  await writeFile(path.join(ROOT, 'bench/results/batch-processes.txt'), lines.join('\n') + '\n');
} finally {
  await db.end();
  await sim.close();
  await temporal.stop();
  await dropDatabase(databaseUrl);
  await rm(blobDir, { recursive: true, force: true });
}
