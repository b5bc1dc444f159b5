/**
 * Load on the real processes (npx tsx bench/load.ts), loopback only, bounded, stops by itself:
 *  - autocannon (one keep-alive connection per client, each sends its next request when the
 *    previous answer is read) against GET /v1/modules, GET /v2/lookup?sha256, POST /v2/lookup
 *    (one 640×480 image), full cache hits on POST /v1/analyze and fresh analyses of distinct
 *    photos (simulated vendor, 0 ms); p50/p90/p99/max latency and throughput for each, and every
 *    answer must be 2xx or the script fails;
 *  - peak memory of a fresh API process while 10 clients send a ~37 MB JPEG each (~49 MB of
 *    base64) at once: VmHWM from /proc/<pid>/status plus VmRSS sampled every 20 ms.
 * The API and one worker run as child processes (node --import tsx, as npm start runs them),
 * with a Temporal dev server, the simulated vendor in this process, and a scratch database that is
 * dropped at the end. Writes bench/results/load.txt.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import sharp from 'sharp';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { grant } from '../credits/ledger.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { startTemporalDevServer } from '../tools/scripts/temporal.ts';
import { startSimVendor } from '../tools/sim/index.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PHOTO = path.join(ROOT, 'test/fixtures/photos/gps-DSCN0010.jpg');
const USERS = 50;
/** Every scenario stops after its requests or this long, whichever comes first; also autocannon's per-request timeout. */
const SCENARIO_DEADLINE_MS = 120_000;
const BIG_CLIENTS = 10;
/** 4200×3000 of noise at JPEG q100 4:4:4 is ~37 MB: ~49 MB of base64, under the 50 MiB and 100 MP caps. */
const BIG_SIZE = { width: 4200, height: 3000 };

const AUTOCANNON_VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'node_modules/autocannon/package.json'), 'utf8')) as { version: string }).version;

const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

interface Scenario {
  name: string;
  /** autocannon connections: each is one client with one request in flight. */
  clients: number;
  /** autocannon `amount`: the run ends after this many answers (split evenly over the clients). */
  requests: number;
  method: 'GET' | 'POST';
  path: string;
  /** JSON body of the i-th request built in this scenario (i from 0); none for GET. */
  body?: (i: number) => string;
  /** x-request-id of the i-th request, when the API's log lines of it are wanted. */
  requestId?: (i: number) => string;
  /** The i-th request goes out with user (i + userOffset) mod USERS's key. */
  userOffset?: number;
}

interface Outcome {
  scenario: Scenario;
  result: autocannon.Result;
  /** setupRequest calls: one per request sent, so == requests when every request went out once. */
  built: number;
}

function describe({ scenario, result: r }: Outcome): string {
  const statuses = Object.entries(r.statusCodeStats ?? {}).map(([code, { count }]) => `${code}×${count ?? 0}`).join(' ');
  const rps = r.requests.total / r.duration;
  const ms = (x: number) => x.toFixed(0).padStart(6);
  return `${scenario.name.padEnd(34)} ${String(scenario.clients).padStart(3)} clients  n=${String(r.requests.total).padEnd(5)} ${rps.toFixed(1).padStart(7)} req/s (${r.duration.toFixed(2)} s)  p50 ${ms(r.latency.p50)} ms  p90 ${ms(r.latency.p90)} ms  p99 ${ms(r.latency.p99)} ms  max ${ms(r.latency.max)} ms  [${statuses}${r.errors ? ` errors×${r.errors}` : ''}${r.timeouts ? ` timeouts×${r.timeouts}` : ''}]`;
}

/** Throws unless every one of the scenario's requests was sent once and answered 2xx. */
function requireAll2xx({ scenario, result: r, built }: Outcome): void {
  const ok = r['2xx'] === scenario.requests && r.requests.total === scenario.requests && r.non2xx === 0 && r.errors === 0 && r.timeouts === 0 && r.resets === 0 && built === scenario.requests;
  if (ok) return;
  const why = `${scenario.name}: expected ${scenario.requests} answers, all 2xx; got 2xx=${r['2xx']} non2xx=${r.non2xx} errors=${r.errors} timeouts=${r.timeouts} resets=${r.resets} answers=${r.requests.total} sent=${built}`;
  say(`FAILED: ${why}`);
  throw new Error(why);
}

/** A child service process; its output is scanned for `ready`, kept when `keep`, otherwise discarded. */
function spawnService(script: string, env: NodeJS.ProcessEnv, ready: RegExp, keep = false): { child: ChildProcess; ready: Promise<string>; output: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let seen = '';
  let kept = '';
  if (keep) child.stdout!.on('data', (d: Buffer) => (kept += d.toString()));
  const readyP = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} not ready in 90 s:\n${seen.slice(-2000)}`)), 90_000);
    const onData = (d: Buffer) => {
      if (seen.length < 100_000) seen += d.toString();
      const m = ready.exec(seen);
      if (m) {
        clearTimeout(timer);
        resolve(m[1] ?? m[0]);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before it was ready:\n${seen.slice(-2000)}`)));
  });
  readyP.catch(() => {});
  return { child, ready: readyP, output: () => kept };
}

/** Median ms between two log messages of the same request (ids starting `prefix`), from the API's JSON lines. */
function phaseMedians(output: string, prefix: string): Record<string, number> {
  const byRequest = new Map<string, Record<string, number>>();
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    const l = JSON.parse(line) as { requestId?: string; msg?: string; time?: string };
    if (!l.requestId?.startsWith(prefix) || !l.msg || !l.time) continue;
    const r = byRequest.get(l.requestId) ?? {};
    r[l.msg] = Date.parse(l.time);
    byRequest.set(l.requestId, r);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const between = (a: string, b: string) => median([...byRequest.values()].filter((r) => r[a] && r[b]).map((r) => r[b]! - r[a]!));
  return {
    'received → workflow started (body read, JSON parse, base64, intake)': between('incoming request', 'workflow started'),
    'workflow started → completed (worker: fingerprint, vendor, persist)': between('workflow started', 'workflow completed'),
    'workflow completed → response sent': between('workflow completed', 'request completed'),
  };
}

async function stopService(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const force = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(force);
}

/** kB figures of /proc/<pid>/status (VmRSS: now, VmHWM: peak since start). */
function procMemoryKb(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;

const dbName = `lenstack_bench_load_${process.pid}`;
const databaseUrl = `postgres://postgres@127.0.0.1:5432/${dbName}`;
const blobDir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-bench-load-'));
const temporal = await startTemporalDevServer({});
const sim = await startSimVendor({ port: 0 });
await createDatabaseIfMissing(databaseUrl);
await migrate(databaseUrl);
const db = createPool(databaseUrl, { max: 5 });
const env: NodeJS.ProcessEnv = {
  ...process.env,
  NODE_ENV: 'production',
  DATABASE_URL: databaseUrl,
  TEMPORAL_ADDRESS: temporal.address,
  TEMPORAL_TASK_QUEUE: `bench-load-${process.pid}`,
  REDIS_PREFIX: `lenstack-bench-load-${process.pid}:`,
  BLOB_DIR: blobDir,
  SIM_VENDOR_URL: sim.url,
  INTERNAL_SECRET: randomBytes(32).toString('hex'),
  OPENAI_API_KEY: '',
  ANTHROPIC_API_KEY: '',
  GEMINI_API_KEY: '',
  HOST: '127.0.0.1',
  PORT: '0',
  LOG_LEVEL: 'info',
};
const children: ChildProcess[] = [];

try {
  const worker = spawnService('worker/main.ts', env, /polling task queue/);
  children.push(worker.child);
  let api = spawnService('api/server.ts', env, /Server listening at (http:\/\/127\.0\.0\.1:\d+)/);
  children.push(api.child);
  await worker.ready;
  let base = await api.ready;

  const keys: string[] = [];
  for (let u = 0; u < USERS; u++) {
    const { accountId } = await createBillingAccount(db, `load-${u}@example.test`);
    keys.push((await issueKey(db, accountId, 'live')).key);
    await grant(db, { accountId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench-load' });
  }
  // Requests go round-robin over the users: 600/min per user would otherwise cap the test.
  const keyFor = (i: number) => keys[i % keys.length]!;

  /**
   * One bounded autocannon run against the current API. setupRequest numbers the requests in the
   * order they are built (autocannon builds each one just before it sends it), which picks the
   * user's key and the body, so every fresh photo goes out exactly once.
   */
  const load = async (scenario: Scenario): Promise<Outcome> => {
    let built = 0;
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon(
        {
          url: base,
          connections: scenario.clients,
          amount: scenario.requests,
          timeout: SCENARIO_DEADLINE_MS / 1000,
          // Results come at the first sample tick after the last answer: 100 ms keeps `duration` close to the wall time.
          sampleInt: 100,
          requests: [
            {
              method: scenario.method,
              path: scenario.path,
              setupRequest: (req) => {
                const i = built++;
                return {
                  ...req,
                  headers: {
                    ...req.headers,
                    authorization: `Bearer ${keyFor(i + (scenario.userOffset ?? 0))}`,
                    ...(scenario.body ? { 'content-type': 'application/json' } : {}),
                    ...(scenario.requestId ? { 'x-request-id': scenario.requestId(i) } : {}),
                  },
                  ...(scenario.body ? { body: scenario.body(i) } : {}),
                };
              },
            },
          ],
        },
        (err, res) => {
          clearTimeout(deadline);
          if (err) reject(err instanceof Error ? err : new Error(String(err)));
          else resolve(res);
        },
      );
      const deadline = setTimeout(() => instance.stop(), SCENARIO_DEADLINE_MS);
    });
    const outcome = { scenario, result, built };
    say(describe(outcome));
    return outcome;
  };

  // Distinct 640×480 photos: the index as a row of black/white blocks survives JPEG.
  const source = await sharp(PHOTO).resize(640, 480).raw().toBuffer({ resolveWithObject: true });
  const photo = async (i: number) => {
    const px = Buffer.from(source.data);
    for (let bit = 0; bit < 12; bit++) {
      const v = (i >> bit) & 1 ? 255 : 0;
      for (let y = 0; y < 16; y++) for (let x = 0; x < 16; x++) px.set([v, v, v], (y * 640 + bit * 16 + x) * 3);
    }
    return (await sharp(px, { raw: source.info }).jpeg({ quality: 90 }).toBuffer()).toString('base64');
  };
  const N_FRESH = 300;
  const fresh: string[] = [];
  for (let i = 1; i <= N_FRESH; i++) fresh.push(await photo(i));
  const hitPhoto = await photo(0);
  const hitSha = createHash('sha256').update(Buffer.from(hitPhoto, 'base64')).digest('hex');

  const hitBody = JSON.stringify({ imageBase64: hitPhoto, preset: 'full-analysis' });

  // Warm-up, and every user's registry gets the cache-hit photo.
  requireAll2xx(await load({ name: 'warm-up: hit photo, once per user', clients: 10, requests: USERS, method: 'POST', path: '/v1/analyze', body: () => hitBody }));
  lines.length = 0;

  say(`# Load: autocannon ${AUTOCANNON_VERSION} over loopback (one request in flight per client), real API and worker processes, simulated vendor at 0 ms`);
  say(`machine: ${os.cpus().length} cores (${os.cpus()[0]?.model}), ${Math.round(os.totalmem() / 2 ** 30)} GiB; load before ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}; node ${process.version}`);
  say('one API process and one worker (child processes, LOG_LEVEL=info), Temporal dev server, Postgres, Redis, the simulator and this client on the same machine');
  say('req/s = answers / autocannon duration; latencies are autocannon\'s (whole ms)');
  say('');
  const scenarios: Scenario[] = [
    { name: 'GET /v1/modules', clients: 20, requests: 3000, method: 'GET', path: '/v1/modules' },
    { name: 'GET /v2/lookup?sha256 (exact hit)', clients: 20, requests: 2000, method: 'GET', path: `/v2/lookup?sha256=${hitSha}` },
    { name: 'POST /v2/lookup (1 image, 640×480)', clients: 20, requests: 1000, method: 'POST', path: '/v2/lookup', body: () => JSON.stringify({ images_base64: [hitPhoto] }) },
    { name: 'POST /v1/analyze, full cache hit', clients: 20, requests: 1500, method: 'POST', path: '/v1/analyze', body: () => hitBody },
    { name: 'POST /v1/analyze, fresh (workflow)', clients: 10, requests: N_FRESH, method: 'POST', path: '/v1/analyze', body: (i) => JSON.stringify({ imageBase64: fresh[i], preset: 'full-analysis' }) },
  ];
  for (const scenario of scenarios) requireAll2xx(await load(scenario));

  // Peak memory: a fresh API process, 10 clients each sending a ~49 MB base64 image at once.
  say('');
  await stopService(api.child);
  api = spawnService('api/server.ts', env, /Server listening at (http:\/\/127\.0\.0\.1:\d+)/, true);
  children.push(api.child);
  base = await api.ready;
  const pid = api.child.pid!;
  const bigs: string[] = [];
  for (let i = 0; i < BIG_CLIENTS; i++) {
    const noise = randomBytes(BIG_SIZE.width * BIG_SIZE.height * 3);
    const jpeg = await sharp(noise, { raw: { ...BIG_SIZE, channels: 3 } }).jpeg({ quality: 100, chromaSubsampling: '4:4:4' }).toBuffer();
    bigs.push(jpeg.toString('base64'));
  }
  const jpegMb = (Buffer.byteLength(bigs[0]!, 'base64') / 1e6).toFixed(1);
  const b64Mb = (bigs[0]!.length / 1e6).toFixed(1);
  // One small analysis first so the idle figure includes loaded code paths (sharp, Temporal client).
  const first = await fetch(`${base}/v1/analyze`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keyFor(0)}`, 'content-type': 'application/json' },
    body: JSON.stringify({ imageBase64: hitPhoto, modules: ['dating'] }),
  });
  await first.arrayBuffer();
  if (!first.ok) throw new Error(`small analysis before the burst answered ${first.status}`);
  const idle = procMemoryKb(pid);
  let sampledPeak = idle.rss;
  const sampler = setInterval(() => {
    sampledPeak = Math.max(sampledPeak, procMemoryKb(pid).rss);
  }, 20);
  // autocannon builds each client's first request when it creates the client and sends it on connect, so all 10 go at once.
  const big = await load({
    name: `POST /v1/analyze, ${BIG_CLIENTS} × ${b64Mb} MB base64 at once`,
    clients: BIG_CLIENTS,
    requests: BIG_CLIENTS,
    method: 'POST',
    path: '/v1/analyze',
    body: (i) => JSON.stringify({ imageBase64: bigs[i], modules: ['dating'] }),
    requestId: (i) => `big-${i}-${process.pid}`,
    userOffset: 1,
  });
  clearInterval(sampler);
  const after = procMemoryKb(pid);
  const workerMem = procMemoryKb(worker.child.pid!);
  say(`API process RSS: idle ${mb(idle.rss)} → peak ${mb(after.hwm)} (VmHWM; highest 20 ms sample ${mb(sampledPeak)}); ${mb(after.rss)} after the burst`);
  say(`images: ${BIG_SIZE.width}×${BIG_SIZE.height} noise JPEG q100 4:4:4, ${jpegMb} MB each (${b64Mb} MB base64), ${big.result['2xx']}/${BIG_CLIENTS} answered 2xx`);
  say(`worker process peak RSS over the whole run: ${mb(workerMem.hwm)}`);
  for (const [phase, ms] of Object.entries(phaseMedians(api.output(), 'big-'))) say(`  median ${phase}: ${(ms / 1000).toFixed(1)} s`);
  requireAll2xx(big);
  say('every request of every scenario answered 2xx');
} finally {
  for (const c of children) await stopService(c);
  await mkdir(path.join(ROOT, 'bench/results'), { recursive: true });
  await writeFile(path.join(ROOT, 'bench/results/load.txt'), lines.join('\n') + '\n');
  await db.end();
  await sim.close();
  await temporal.stop();
  await dropDatabase(databaseUrl);
  await rm(blobDir, { recursive: true, force: true });
}
