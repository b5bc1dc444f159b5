/**
 * A fleet through the CLI, the stack as `npm start` runs it (issue 22 §4):
 *
 *   npx tsx bench/fleet.ts --vehicles 50,200 --photos 25 [--no-resume]
 *   npx tsx bench/fleet.ts --vehicles 1000 --photos 10 --no-resume --max-mb 3.7
 *
 * For each size (vehicles × photos per vehicle), in this order and each on its own:
 *
 * - **The stack**: a fresh scratch database (migrated), a fresh blob directory, and fresh API
 *   (`api/server.ts`), worker (`worker/main.ts`) and console (`web/server.ts`) processes, each
 *   `node --import tsx <script>` as `npm start` runs them, sharing the database, the blob store
 *   (`BLOB_STORE=fs`, one `BLOB_DIR`) and its tus datastore (`<BLOB_DIR>-uploads`), as processes
 *   of one host do in production. One Temporal dev server and the simulated vendor (in this
 *   process, 800 ms latency on every call) serve all sizes. Each process's peak RSS is the
 *   kernel's VmHWM from /proc/<pid>/status, read just before it is stopped; its CPU time is
 *   utime + stime from /proc/<pid>/stat, read at each phase boundary.
 * - **The folder**: V vehicle sub-folders of P photos each and a `vehicles.csv` manifest (folder,
 *   VIN, mileage, make, model, year). The photos are camera-like JPEGs of 3–5 MB: a pool of a few
 *   distinct ones (a fixture enlarged to 4.9–7.1 MP with sensor-like noise, quality 95: a phone
 *   camera's size and entropy), and every file made distinct by a JPEG COM segment inserted after
 *   SOI that carries its number. **Files of the same pool entry have the same pixels** but
 *   different bytes and SHA-256: to Lenstack each is a new photo (uploaded, stored, its own
 *   registry entry and vendor call), and the worker still reads and decodes every file; only
 *   their pictures repeat. Written to a temp dir, removed after the size; free disk is checked
 *   first and a size that does not fit is refused. `--max-mb M` keeps only the pool's photos of at
 *   most M MB (still 3–5 MB): 1,000 × 10 photos of the whole pool need about 79 GiB with their
 *   copies in the blob store, of the smaller ones about 68.
 * - **The run**: `lenstack batch --vehicles <folder> --json` as a child process, as a user runs it
 *   (hash, submit one vehicle batch awaiting its uploads, upload over tus beside it, follow it to
 *   the end), under GNU time for the CLI's peak RSS and CPU. Times from the uploads, batches and
 *   batch_items tables: the batch stored, the first upload created and the last finished, the
 *   first vehicle done, the batch completed; and how long the analysis ran beside the uploads and
 *   after the last of them. (Before issue 22 §4 the CLI uploaded everything, then submitted.)
 * - **Ideals** (the issue's): uploading the bytes at the loopback bandwidth this machine measures
 *   on the same files just before (four streams into a discarding server), and analyzing:
 *   V × (P + 1) calls (P photos and one synthesis per vehicle) × 800 ms ÷ the batch's vendor
 *   share. The share is BATCH_CONCURRENCY (4): one batch alone in its workspace gets
 *   min(BATCH_CONCURRENCY, BATCH_WORKSPACE_CONCURRENCY (8) ÷ running batches) = 4, and
 *   `vehicleLanes(4, 16)` (workflows/batch.ts) runs four vehicles of one call each.
 * - **Resume** (on the largest size, after its peaks are read, in the same processes; skipped with
 *   --no-resume): the folder written again with new numbers (new SHA-256s), a new account, the
 *   CLI through a proxy counting every POST and PATCH body byte, SIGKILLed once half the uploads
 *   finished (the uploads table), then the same command again until every upload finished (the
 *   batch runs on without it): bytes sent ÷ the folder's bytes, batches made, and the bytes of
 *   requests the API did not answer 2xx (or that the kill cut off), by method and answer.
 *
 * Writes bench/results/fleet-vehicles-{V1,V2…}x{P}.txt.
 */
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, statfsSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { BATCH_CONCURRENCY } from '../batches/submit.ts';
import { grant } from '../credits/ledger.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool, type Db } from '../db/pool.ts';
import { freePort, startTemporalDevServer, type DevServer } from '../tools/scripts/temporal.ts';
import { startSimVendor, type SimVendor } from '../tools/sim/index.ts';
import { vehicleLanes } from '../workflows/batch.ts';
import { cameraPhotos } from './camera-photos.ts';
import { CLK_TCK, cpuMsOf } from './proc-stat.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = path.join(ROOT, 'clients/cli/bin/lenstack.js');
const LATENCY_MS = 800;
const POOL = 6;
const { values: opts } = parseArgs({
  options: { vehicles: { type: 'string', default: '50,200' }, photos: { type: 'string', default: '25' }, 'no-resume': { type: 'boolean', default: false }, 'max-mb': { type: 'string' } },
});
const SIZES = opts.vehicles.split(',').map(Number);
const P = Number(opts.photos);
if (SIZES.some((v) => !Number.isInteger(v) || v < 1 || v > 1000) || !Number.isInteger(P) || P < 1 || P > 50 || SIZES.some((v) => v * P > 10_000)) {
  throw new Error('--vehicles takes sizes from 1 to 1000 (comma-separated), --photos 1 to 50, at most 10,000 photos a size (a batch\'s limits)');
}
const lines: string[] = [];
const RESULTS = path.join(ROOT, `bench/results/fleet-vehicles-${SIZES.join(',')}x${P}.txt`);
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};
const mib = (b: number) => `${(b / 1024 ** 2).toFixed(0)} MiB`;
const gib = (b: number) => `${(b / 1024 ** 3).toFixed(1)} GiB`;
const s1 = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const load = () => os.loadavg().map((l) => l.toFixed(1)).join(' ');

// ---- photos -------------------------------------------------------------------------------------

/** The pool: POOL distinct camera-like JPEGs, 4.9 to 7.1 MP of a fixture with sensor-like noise, q95 (bench/camera-photos.ts). */
async function photoPool(): Promise<Buffer[]> {
  const all = await cameraPhotos(POOL);
  if (opts['max-mb'] === undefined) return all;
  const kept = all.filter((b) => b.length <= Number(opts['max-mb']) * 1e6);
  if (kept.length === 0) throw new Error(`--max-mb ${opts['max-mb']}: no photo of the pool is that small (the smallest is ${(Math.min(...all.map((b) => b.length)) / 1e6).toFixed(2)} MB)`);
  return kept;
}

/** A COM segment (FF FE, length, text) making a file distinct: inserted after SOI, pixels unchanged. */
function comSegment(text: string): Buffer {
  const body = Buffer.from(text, 'latin1');
  const seg = Buffer.alloc(4 + body.length);
  seg[0] = 0xff;
  seg[1] = 0xfe;
  seg.writeUInt16BE(body.length + 2, 2);
  body.copy(seg, 4);
  return seg;
}

const vin = (v: number) => `BENCH${String(v).padStart(12, '0')}`;

/** The fleet folder: V sub-folders of P photos, numbered from `from`, and vehicles.csv. Returns the bytes and the files. */
async function writeFleet(dir: string, vehicles: number, pool: Buffer[], from: number): Promise<{ bytes: number; files: string[] }> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const nonce = randomBytes(8).toString('hex');
  const files: string[] = [];
  let bytes = 0;
  const csv = ['folder,vin,mileage,make,model,year'];
  for (let v = 0; v < vehicles; v++) {
    const folder = `vehicle-${String(v).padStart(4, '0')}`;
    await mkdir(path.join(dir, folder));
    csv.push(`${folder},${vin(v)},${10_000 + v * 37},Bench,Fleet ${v % 7},${2015 + (v % 10)}`);
    for (let p = 0; p < P; p++) {
      const n = from + v * P + p;
      const jpeg = pool[n % pool.length]!;
      const com = comSegment(`lenstack fleet bench photo ${n} ${nonce}`);
      const file = path.join(dir, folder, `IMG_${String(p).padStart(4, '0')}.jpg`);
      const fh = await open(file, 'w');
      try {
        await fh.writev([jpeg.subarray(0, 2), com, jpeg.subarray(2)]);
      } finally {
        await fh.close();
      }
      files.push(file);
      bytes += jpeg.length + com.length;
    }
  }
  await writeFile(path.join(dir, 'vehicles.csv'), `${csv.join('\n')}\n`);
  return { bytes, files };
}

// ---- measuring ----------------------------------------------------------------------------------

/** Loopback HTTP into a server that discards: what moving these bytes costs here, four streams at once. */
async function loopbackSeconds(files: string[]): Promise<number> {
  const sink = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end());
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/`;
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < files.length) {
        const body = await readFile(files[next++]!);
        await fetch(url, { method: 'PATCH', body });
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  sink.close();
  return s;
}

/**
 * A proxy counting the photo bytes on their way to the API (the bodies of POSTs, which carry a
 * photo with tus creation-with-upload, and of PATCHes), and apart, by the API's answer, those of
 * requests it did not answer 2xx (the rate limit answers before reading the body: what was on the
 * wire is sent again), or that got no answer (cut by the kill).
 */
async function countingProxy(target: string): Promise<{ url: string; bytes: () => number; lost: () => string; close: () => void }> {
  let bytes = 0;
  const lost = new Map<string, { requests: number; bytes: number }>();
  const server = createServer((req, res) => {
    let mine = 0;
    let status = '';
    const up = httpRequest(new URL(req.url!, target), { method: req.method, headers: req.headers }, (answer) => {
      status = String(answer.statusCode);
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
      // What a request not answered 2xx (or not answered at all) had sent by the time it ended.
      if (mine === 0 || (status.startsWith('2') && res.writableFinished)) return;
      const key = `${req.method} ${res.writableFinished ? status : 'no answer'}`;
      const at = lost.get(key) ?? { requests: 0, bytes: 0 };
      lost.set(key, { requests: at.requests + 1, bytes: at.bytes + mine });
    });
    req.on('data', (c: Buffer) => {
      if (req.method === 'PATCH' || req.method === 'POST') {
        bytes += c.length;
        mine += c.length;
      }
    });
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bytes: () => bytes,
    lost: () => [...lost].map(([k, v]) => `${k}: ${v.requests} requests, ${mib(v.bytes)}`).join('; ') || 'none',
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

const hwmMb = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
/** Busy CPU seconds of the whole machine so far (all cores; /proc/stat less idle and iowait). */
function machineBusySeconds(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (f.reduce((a, b) => a + b, 0) - f[3]! - f[4]!) / CLK_TCK;
}
/** CPU seconds (user + system) of a process so far. */
const cpuSeconds = (pid: number): number => cpuMsOf(readFileSync(`/proc/${pid}/stat`, 'utf8')) / 1000;

interface CliRun { code: number | null; signal: NodeJS.Signals | null; ms: number; submittedMs: number | null; maxRssKb: number | null; cpuS: number | null; stdout: string; stderr: string }

function runCli(args: string[], env: Record<string, string>, opts: { kill?: (kill: () => void) => void; onSubmitted?: () => void } = {}): Promise<CliRun> {
  const t0 = performance.now();
  // GNU time reports the child's peak resident set (KiB) and CPU on its last stderr line; a run that
  // is to be killed is the CLI itself, so the kill reaches it.
  const command = opts.kill ? [process.execPath, BIN, ...args] : ['/usr/bin/time', '-f', 'maxrss=%M user=%U sys=%S', process.execPath, BIN, ...args];
  const child = spawn(command[0]!, command.slice(1), { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } });
  let stdout = '';
  let stderr = '';
  let submittedMs: number | null = null;
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => {
    stderr += c;
    if (submittedMs === null && / submitted \(/.test(stderr)) {
      submittedMs = performance.now() - t0;
      opts.onSubmitted?.();
    }
  });
  opts.kill?.(() => child.kill('SIGKILL'));
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      const t = /maxrss=(\d+) user=([\d.]+) sys=([\d.]+)/.exec(stderr);
      resolve({ code, signal, ms: performance.now() - t0, submittedMs, maxRssKb: t ? Number(t[1]) : null, cpuS: t ? Number(t[2]) + Number(t[3]) : null, stdout, stderr });
    });
  });
}

// ---- the stack ----------------------------------------------------------------------------------

// Started once the sizes are known to fit on disk; they serve every size.
let temporal: DevServer | undefined;
let sim: SimVendor | undefined;
const secret = () => randomBytes(24).toString('hex');

interface Stack { db: Db; api: ChildProcess; worker: ChildProcess; web: ChildProcess; base: string; close(): Promise<void> }

function spawnService(script: string, env: NodeJS.ProcessEnv): { child: ChildProcess; out: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { child, out: () => out };
}

async function waitFor(what: string, child: ChildProcess, out: () => string, ok: () => Promise<boolean>, ms = 300_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}): ${out().slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`${what} did not start within ${ms / 1000} s: ${out().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const stopChild = (c: ChildProcess) =>
  new Promise<void>((r) => {
    if (c.exitCode !== null || c.signalCode !== null) return r();
    c.once('exit', () => r());
    c.kill('SIGTERM');
    setTimeout(() => c.kill('SIGKILL'), 30_000).unref();
  });

async function startStack(tag: string, blobDir: string): Promise<Stack> {
  const databaseUrl = `postgres://postgres@127.0.0.1:5432/lenstack_bench_fleet_${process.pid}_${tag}`;
  await createDatabaseIfMissing(databaseUrl);
  await migrate(databaseUrl);
  const db = createPool(databaseUrl, { max: 4 });
  const [port, webPort] = [await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'development',
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporal!.address,
    TEMPORAL_TASK_QUEUE: `bench-fleet-${process.pid}-${tag}`,
    REDIS_PREFIX: `lenstack-bench-fleet-${process.pid}-${tag}:`,
    BLOB_STORE: 'fs',
    BLOB_DIR: blobDir,
    SIM_VENDOR_URL: sim!.url,
    LOG_LEVEL: 'warn',
    OPENAI_API_KEY: '',
    ANTHROPIC_API_KEY: '',
    GEMINI_API_KEY: '',
    PORT: String(port),
    WEB_PORT: String(webPort),
    HOST: '127.0.0.1',
    INTERNAL_SECRET: secret(),
    AUTH_SECRET: secret(),
    DEV_MAILBOX: 'true',
    PAYMENTS_GATEWAY: 'recording',
  };
  const worker = spawnService('worker/main.ts', env);
  const api = spawnService('api/server.ts', env);
  const web = spawnService('web/server.ts', env);
  const base = `http://127.0.0.1:${port}`;
  const close = async () => {
    await Promise.all([stopChild(api.child), stopChild(web.child), stopChild(worker.child)]);
    await db.end();
    await dropDatabase(databaseUrl);
  };
  try {
    await waitFor('the worker', worker.child, worker.out, async () => /polling task queue/.test(worker.out()));
    await waitFor('the API', api.child, api.out, () => fetch(`${base}/v1/health`).then((r) => r.ok, () => false));
    await waitFor('the console', web.child, web.out, () => fetch(`http://127.0.0.1:${webPort}/api/v1/session`).then((r) => r.status === 401, () => false));
  } catch (err) {
    await close();
    throw err;
  }
  return { db, api: api.child, worker: worker.child, web: web.child, base, close };
}

async function newKey(db: Db, name: string): Promise<{ accountId: string; key: string }> {
  const { accountId } = await createBillingAccount(db, `bench-fleet-${name}-${process.pid}@example.test`);
  await grant(db, { accountId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
  return { accountId, key: (await issueKey(db, accountId, 'live')).key };
}

// ---- the run ------------------------------------------------------------------------------------

const work = await mkdtemp(path.join(os.tmpdir(), 'lenstack-fleet-'));
const started = new Date();
const lanes = vehicleLanes(BATCH_CONCURRENCY, 16);
const SHARE = lanes.atOnce * lanes.photoConcurrency;
const head = execSync('git rev-parse --short HEAD', { cwd: ROOT }).toString().trim();
try {
  const pool = await photoPool();
  const avg = pool.reduce((n, b) => n + b.length, 0) / pool.length;
  say(`fleet bench (CLI, --vehicles), ${started.toISOString()}, commit ${head}, node ${process.version}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), load average ${load()}`);
  say(`vendor latency ${LATENCY_MS} ms; vendor share of a vehicle batch ${SHARE} calls (BATCH_CONCURRENCY ${BATCH_CONCURRENCY}; vehicleLanes(${BATCH_CONCURRENCY}, 16) = ${lanes.atOnce} vehicles × ${lanes.photoConcurrency} call); API, worker and console as separate processes, fresh per size`);
  say(`photo pool: ${pool.length} distinct JPEGs q95, ${pool.map((b) => (b.length / 1e6).toFixed(2)).join(' / ')} MB; every file made distinct by a COM segment after SOI (same pixels within a pool entry, different bytes and SHA-256)`);

  // Disk: the folder and its copy in the blob store, and (largest size, resume) the folder written
  // again (the first one is removed before) and stored again; each photo's prepared vendor upload
  // (docs/decisions.md, "A vehicle's next photo prepared during the call", under 0.4 MB) is kept too.
  const largest = Math.max(...SIZES);
  const PREPARED = 400_000;
  const resumes = (v: number) => v === largest && !opts['no-resume'];
  const needFor = (v: number) => v * P * ((avg + 100) * (resumes(v) ? 3 : 2) + PREPARED * (resumes(v) ? 2 : 1)) + 2 * 1024 ** 3;
  const fs = statfsSync(work);
  const free = fs.bavail * fs.bsize;
  for (const v of SIZES) {
    if (needFor(v) > free) {
      say(`refused: ${v} vehicles × ${P} photos needs about ${gib(needFor(v))} in ${os.tmpdir()} (the folder, its copy in the blob store${resumes(v) ? ', the resume folder stored again' : ''}, 2 GiB spare); ${gib(free)} free`);
      process.exitCode = 2;
    }
  }
  if (process.exitCode === 2) throw new Error('not enough free disk for the sizes asked (see above)');
  temporal = await startTemporalDevServer({});
  sim = await startSimVendor({ port: 0 });
  sim.setBehaviour('all', { latencyMs: LATENCY_MS });

  const results: Array<{ v: number; api: number; worker: number; web: number }> = [];
  let from = 0;
  for (const v of SIZES) {
    const photos = v * P;
    const dir = path.join(work, `fleet-${v}`);
    const t0gen = performance.now();
    const { bytes, files } = await writeFleet(dir, v, pool, from);
    from += photos;
    const genMs = performance.now() - t0gen;
    const upIdeal = await loopbackSeconds(files);
    const anIdeal = (v * (P + 1) * LATENCY_MS) / SHARE / 1000;
    const blobDir = path.join(work, `blobs-${v}`);
    await mkdir(blobDir);
    const stack = await startStack(String(v), blobDir);
    try {
      const { accountId, key } = await newKey(stack.db, `v${v}`);
      const pids = { api: stack.api.pid!, worker: stack.worker.pid!, web: stack.web.pid! };
      const cpu = () => ({ api: cpuSeconds(pids.api), worker: cpuSeconds(pids.worker), web: cpuSeconds(pids.web), bench: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6, machine: machineBusySeconds() });
      const loadBefore = load();
      const cpu0 = cpu();
      const wall0 = Date.now();
      const run = await runCli(['batch', '--vehicles', dir, '--json'], { LENSTACK_API_KEY: key, LENSTACK_BASE_URL: stack.base }, {});
      const cpu1 = cpu();
      const peaks = { api: hwmMb(pids.api), worker: hwmMb(pids.worker), web: hwmMb(pids.web) };
      if (run.code !== 0) throw new Error(`lenstack exited ${run.code}: ${run.stderr.slice(-3000)}`);
      const result = JSON.parse(run.stdout) as { batch: { counts: { done: number; failed: number; total: number } } };
      const t = (await stack.db.query<{ first: Date; last: Date; n: number }>('SELECT min(created_at) AS first, max(finished_at) AS last, count(*)::int AS n FROM uploads WHERE user_id = $1', [accountId])).rows[0]!;
      // The first vehicle report stored: when the analysis' results began (the batch runs beside the uploads).
      const firstDone = (await stack.db.query<{ at: Date | null }>("SELECT min(finished_at) AS at FROM batch_items i JOIN batches b ON b.id = i.batch_id WHERE b.user_id = $1 AND i.status = 'done'", [accountId])).rows[0]!.at;
      const b = (await stack.db.query<{ created: Date; completed: Date }>('SELECT created_at AS created, completed_at AS completed FROM batches WHERE user_id = $1', [accountId])).rows[0]!;
      const at = (d: Date) => d.getTime() - wall0;
      const wall = run.ms / 1000;
      const ideal = Math.max(upIdeal, anIdeal);
      const d = (k: keyof ReturnType<typeof cpu>, a: ReturnType<typeof cpu>, z: ReturnType<typeof cpu>) => (z[k] - a[k]).toFixed(1);
      say('');
      say(`${v} vehicles × ${P} photos = ${photos} photos, ${mib(bytes)} (${(bytes / photos / 1e6).toFixed(2)} MB each), written in ${s1(genMs)}; load average ${loadBefore} at the start, ${load()} at the end`);
      say(`  done ${result.batch.counts.done}/${result.batch.counts.total} vehicles, failed ${result.batch.counts.failed}; ${t.n} uploads`);
      say(`  wall ${wall.toFixed(1)} s: batch stored at +${s1(at(b.created))} (the CLI's "submitted" at +${s1(run.submittedMs ?? 0)}), uploads from +${s1(at(t.first))} to +${s1(at(t.last))} (${s1(at(t.last) - at(t.first))}), first vehicle done at +${firstDone ? s1(at(firstDone)) : '?'}, batch completed at +${s1(at(b.completed))}; the analysis ran ${s1(Math.max(0, Math.min(at(t.last), at(b.completed)) - Math.max(at(b.created), at(t.first))))} beside the uploads and ${s1(Math.max(0, at(b.completed) - Math.max(at(t.last), at(b.created))))} after the last`);
      say(`  ideals: upload ${upIdeal.toFixed(1)} s (${mib(bytes)} at the loopback's ${((bytes / 1024 ** 2) / upIdeal).toFixed(0)} MiB/s), analysis ${v} × ${P + 1} calls × ${LATENCY_MS} ms ÷ ${SHARE} = ${anIdeal.toFixed(1)} s → wall ${(wall / ideal).toFixed(2)}× the larger (target ≤ 1.25×)`);
      say(`  peak RSS: API ${peaks.api.toFixed(0)} MB, worker ${peaks.worker.toFixed(0)} MB, console ${peaks.web.toFixed(0)} MB, CLI ${run.maxRssKb ? (run.maxRssKb / 1024).toFixed(0) : '?'} MB`);
      say(`  CPU s over the run (uploads and analysis overlap): API ${d('api', cpu0, cpu1)}, worker ${d('worker', cpu0, cpu1)}, console ${d('web', cpu0, cpu1)}, bench process with the simulator ${d('bench', cpu0, cpu1)}, CLI ${run.cpuS?.toFixed(1) ?? '?'}; the whole machine (${os.cpus().length} cores, everyone's work) ${d('machine', cpu0, cpu1)} of ${((run.ms / 1000) * os.cpus().length).toFixed(0)} possible`);
      results.push({ v, ...peaks });
      // Written after each size too, so a run that dies later (the resume, a later size) keeps these figures.
      await writeFile(RESULTS, `${lines.join('\n')}\n`);

      if (resumes(v)) {
        // The first run's folder is done with: removed before its successor is written, so the
        // disk holds three copies of the fleet at most (a 200 × 25 run filled this machine's disk
        // with four, and Postgres stopped).
        await rm(dir, { recursive: true, force: true });
        const rdir = path.join(work, 'resume');
        const resumeFleet = await writeFleet(rdir, v, pool, from);
        from += photos;
        const acct = await newKey(stack.db, `resume${v}`);
        const proxy = await countingProxy(stack.base);
        try {
          const env = { LENSTACK_API_KEY: acct.key, LENSTACK_BASE_URL: proxy.url };
          let kill!: () => void;
          const killed = runCli(['batch', '--vehicles', rdir, '--json'], env, { kill: (k) => (kill = k) });
          const finished = async () => (await stack.db.query<{ n: number }>('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1 AND finished_at IS NOT NULL', [acct.accountId])).rows[0]!.n;
          while ((await finished()) < photos / 2) await new Promise((r) => setTimeout(r, 50));
          kill();
          const first = await killed;
          const sentBefore = proxy.bytes();
          // The same command again, until every photo is uploaded (the batch was submitted before
          // the uploads began, and runs on without the CLI: its analysis is not waited for).
          let stopAgain!: () => void;
          const again = runCli(['batch', '--vehicles', rdir, '--json'], env, { kill: (k) => (stopAgain = k) });
          let exited = false;
          void again.then(() => (exited = true));
          while (!exited && (await finished()) < photos) await new Promise((r) => setTimeout(r, 100));
          stopAgain();
          const second = await again;
          if ((await finished()) < photos) throw new Error(`the resumed run did not upload every photo (${second.code}): ${second.stderr.slice(-3000)}`);
          const rows = (await stack.db.query<{ n: number; items: number }>('SELECT count(*)::int AS n, max(item_count)::int AS items FROM batches WHERE user_id = $1', [acct.accountId])).rows[0]!;
          say(`  resume: ${v} × ${P} photos, ${mib(resumeFleet.bytes)}; killed (${first.signal ?? first.code}) after ${mib(sentBefore)} sent, the same command again until every photo was uploaded: ${mib(proxy.bytes())} sent in all → ${(proxy.bytes() / resumeFleet.bytes).toFixed(3)}× the folder's bytes (target ≤ 1.05×); batches ${rows.n}, of ${rows.items} vehicles; bytes of requests not answered 2xx: ${proxy.lost()}`);
        } finally {
          proxy.close();
          await rm(rdir, { recursive: true, force: true });
        }
      }
    } finally {
      await stack.close();
      await rm(dir, { recursive: true, force: true });
      await rm(blobDir, { recursive: true, force: true });
      await rm(`${blobDir}-uploads`, { recursive: true, force: true });
    }
  }
  if (results.length > 1) {
    const [lo, hi] = [results[0]!, results[results.length - 1]!];
    say('');
    say(`peak RSS at ${hi.v} over ${lo.v} vehicles: API ${(hi.api / lo.api).toFixed(2)}×, worker ${(hi.worker / lo.worker).toFixed(2)}×, console ${(hi.web / lo.web).toFixed(2)}× (target ≤ 1.2×)`);
  }
  say(`ended ${new Date().toISOString()}, load average ${load()}`);
  await writeFile(RESULTS, `${lines.join('\n')}\n`);
} finally {
  await rm(work, { recursive: true, force: true });
  await sim?.close();
  await temporal?.stop();
}
