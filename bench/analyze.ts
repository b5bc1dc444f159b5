/**
 * Analyze end to end over real HTTP, side by side in one run (npx tsx bench/analyze.ts):
 *  - fresh 1-photo full-analysis vs the same vendor call made directly (orchestration overhead),
 *    and vs the Temporal floor: the saga's shape with steps that do nothing (bench/floor-workflows.ts)
 *  - full cache hits, of a small photo and of a multi-megabyte one against a health round trip
 *  - throughput at 20 concurrent clients (fresh and cache hits)
 *  - a 50-photo vehicle report vs a 1-photo report with 800 ms simulated vendor latency
 * Real Postgres, Redis, a Temporal dev server, one in-process worker, the simulated vendors.
 * Writes bench/results/analyze.txt.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import sharp from 'sharp';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { buildApp } from '../api/app.ts';
import { KeyCache } from '../auth/cache.ts';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { loadConfig } from '../core/config.ts';
import { grant } from '../credits/ledger.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { FsBlobStore } from '../images/blobstore.ts';
import { LENSES } from '../lenses/index.ts';
import { buildPrompt } from '../lenses/prompt.ts';
import { jsonSchemaFor } from '../lenses/schema.ts';
import { startTemporalDevServer } from '../tools/scripts/temporal.ts';
import { startSimVendor } from '../tools/sim/index.ts';
import { createVisionClients } from '../vendors/index.ts';
import { startWorker } from '../worker/main.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { createApiMetrics } from '../metrics/api.ts';
import { noRateLimits } from '../test/helpers/deps.ts';
import { commOf, cpuMsOf } from './proc-stat.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PHOTO = path.join(ROOT, 'test/fixtures/photos/gps-DSCN0010.jpg');
const N_FRESH = 150;
const N_HIT = 300;
const N_BIG_HIT = 100;
const N_THROUGHPUT = 200;
const CONCURRENCY = 20;

/** History event types (temporal.api.enums.v1.EventType) read by the breakdown. */
const EVENT = {
  WORKFLOW_EXECUTION_STARTED: 1,
  WORKFLOW_EXECUTION_COMPLETED: 2,
  WORKFLOW_TASK_SCHEDULED: 5,
  WORKFLOW_TASK_STARTED: 6,
  WORKFLOW_TASK_COMPLETED: 7,
  ACTIVITY_TASK_SCHEDULED: 10,
  ACTIVITY_TASK_COMPLETED: 12,
} as const;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const fmt = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(1)} ms  p99 ${pct(xs, 99).toFixed(1)} ms  (n=${xs.length})`;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

Runtime.install({ logger: new DefaultLogger('ERROR') });
const dbName = `lenstack_bench_analyze_${process.pid}`;
const blobDir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-bench-'));
const temporalServer = await startTemporalDevServer({});
const sim = await startSimVendor({ port: 0 });
const config = loadConfig({
  ...process.env,
  DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${dbName}`,
  TEMPORAL_ADDRESS: temporalServer.address,
  TEMPORAL_TASK_QUEUE: `bench-${process.pid}`,
  REDIS_PREFIX: `lenstack-bench-${process.pid}:`,
  BLOB_DIR: blobDir,
  SIM_VENDOR_URL: sim.url,
  LOG_LEVEL: 'silent',
  OPENAI_API_KEY: '',
  ANTHROPIC_API_KEY: '',
  GEMINI_API_KEY: '',
});
await createDatabaseIfMissing(config.DATABASE_URL);
await migrate(config.DATABASE_URL);
const db = createPool(config.DATABASE_URL, { max: 20 });
const worker = await startWorker(config, { log: () => {} });
const connection = await Connection.connect({ address: temporalServer.address });
// The floor's worker: same process, same dev server, the SDK's defaults like the real worker.
const floorConnection = await NativeConnection.connect({ address: temporalServer.address });
const floorWorker = await Worker.create({
  connection: floorConnection,
  taskQueue: `bench-floor-${process.pid}`,
  workflowsPath: fileURLToPath(new URL('./floor-workflows.ts', import.meta.url)),
  activities: { nothing: async () => null },
});
const floorRunning = floorWorker.run();
const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
const vision = createVisionClients(config);
const app = await buildApp({
  fetchPolicy: PUBLIC_INTERNET,
  // What is measured is the analysis: requests are not rate-limited here (the limit would refuse the run).
  rateLimiter: noRateLimits,
  metrics: createApiMetrics(),
  config,
  db,
  keyCache: new KeyCache(),
  blobs: new FsBlobStore(blobDir),
  temporal,
});
const base = await app.listen({ host: '127.0.0.1', port: 0 });

try {
  const { accountId } = await createBillingAccount(db, 'bench@example.test');
  const { key } = await issueKey(db, accountId, 'live');
  await grant(db, { accountId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });

  // Distinct 640×480 photos, so every fresh request is really fresh.
  const source = await sharp(PHOTO).resize(640, 480).raw().toBuffer({ resolveWithObject: true });
  const total = N_FRESH + N_THROUGHPUT + 100;
  const photos: string[] = [];
  for (let i = 0; i < total; i++) {
    const px = Buffer.from(source.data);
    // i in binary as a row of black/white 16×16 blocks: survives JPEG, so every file differs.
    for (let bit = 0; bit < 12; bit++) {
      const v = (i >> bit) & 1 ? 255 : 0;
      for (let y = 0; y < 16; y++) for (let x = 0; x < 16; x++) px.set([v, v, v], (y * 640 + bit * 16 + x) * 3);
    }
    photos.push((await sharp(px, { raw: source.info }).jpeg({ quality: 90 }).toBuffer()).toString('base64'));
  }
  let next = 0;
  // The body is serialized and encoded before the clock starts: the client's JSON.stringify of a
  // 3.6 MB image (~3 ms) is the caller's work, not Lenstack's.
  const post = async (body: Record<string, unknown>) => {
    const payload = Buffer.from(JSON.stringify(body));
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/analyze`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: payload,
    });
    const json = (await res.json()) as { meta?: { cacheHit?: boolean; requestId?: string }; usage?: { creditsCharged?: number } };
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${JSON.stringify(json)}`);
    return { ms: performance.now() - t0, json };
  };
  const full = (img: string) => ({ imageBase64: img, preset: 'full-analysis' });

  // Warm-up: bundle caches, connections, JIT.
  for (let i = 0; i < 10; i++) await post(full(photos[next++]!));

  // 1) Fresh full-analysis vs the same vendor call made directly, interleaved.
  const client = vision.clients[0]!;
  const lenses = LENSES.filter((l) => !l.internal).map((l) => l.name);
  const built = buildPrompt({ lenses });
  const schema = jsonSchemaFor(lenses);
  const image = Buffer.from(photos[0]!, 'base64');
  const fresh: number[] = [];
  const direct: number[] = [];
  const freshRuns: Array<{ requestId: string; ms: number }> = [];
  const floorEmpty: number[] = [];
  const floorShape: number[] = [];
  const floorShapeRuns: Array<{ workflowId: string; ms: number }> = [];
  // Started and awaited as the API does it (analysis/await-workflow.ts): start, then result().
  const floor = async (workflowType: 'emptyWorkflow' | 'sagaShapeWorkflow', i: number) => {
    const t0 = performance.now();
    const workflowId = `floor:${workflowType}:${i}`;
    const handle = await temporal.workflow.start(workflowType, { taskQueue: `bench-floor-${process.pid}`, workflowId });
    await handle.result();
    return { workflowId, ms: performance.now() - t0 };
  };
  for (let i = 0; i < N_FRESH; i++) {
    const r = await post(full(photos[next++]!));
    if (r.json.usage?.creditsCharged !== 14) throw new Error(`not a fresh analysis (#${i}): ${JSON.stringify({ usage: r.json.usage, meta: r.json.meta })}`);
    fresh.push(r.ms);
    freshRuns.push({ requestId: r.json.meta!.requestId!, ms: r.ms });
    const t0 = performance.now();
    await client.analyze({ image, system: built.system, prompt: built.prompt, schemaName: 'lenstack_analysis', jsonSchema: schema });
    direct.push(performance.now() - t0);
    floorEmpty.push((await floor('emptyWorkflow', i)).ms);
    const shape = await floor('sagaShapeWorkflow', i);
    floorShape.push(shape.ms);
    floorShapeRuns.push(shape);
  }
  say('# Analyze end to end (simulated vendor at 0 ms latency, real HTTP, 1 worker)');
  say(`machine: ${os.cpus().length} cores (${os.cpus()[0]?.model}), load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}; node ${process.version}`);
  say(`fresh 1-photo full-analysis:       ${fmt(fresh)}`);
  say(`same vendor call made directly:    ${fmt(direct)}`);
  say(`orchestration overhead (p50 diff): ${(pct(fresh, 50) - pct(direct, 50)).toFixed(1)} ms`);
  say('the Temporal floor, same run (bench/floor-workflows.ts: steps that do nothing, started and awaited like the API does):');
  say(`  empty workflow:                  ${fmt(floorEmpty)}`);
  say(`  saga shape (local activity → activity → local activity): ${fmt(floorShape)}`);
  say(`  overhead above the saga shape (p50 diff): ${(pct(fresh, 50) - pct(direct, 50) - pct(floorShape, 50)).toFixed(1)} ms`);

  // Where a fresh analysis spends its time, from the event timestamps of each run's workflow history
  // (the server's clock, millisecond resolution): the API before the workflow starts and after it
  // completes, each workflow task (started → completed, its local activities included), the vendor
  // activity (scheduled → completed) and the waits between them. The saga-shape floor's runs are
  // read the same way, so each part shows what Lenstack's own work adds to it.
  const breakdown = async (runs: Array<{ workflowId: string; ms: number }>) => {
    const spans = new Map<string, number[]>();
    const add = (k: string, v: number) => spans.set(k, [...(spans.get(k) ?? []), v]);
    for (const run of runs) {
      const history = await temporal.workflow.getHandle(run.workflowId).fetchHistory();
      const ev = history.events!.map((e) => ({ type: Number(e.eventType), t: Number(e.eventTime!.seconds) * 1000 + Math.floor((e.eventTime!.nanos ?? 0) / 1e6) }));
      const at = (type: keyof typeof EVENT, nth = 0) => ev.filter((e) => e.type === EVENT[type])[nth]!.t;
      const wfStart = at('WORKFLOW_EXECUTION_STARTED');
      const wfEnd = at('WORKFLOW_EXECUTION_COMPLETED');
      add('workflow task 1 (delta + reserve)', at('WORKFLOW_TASK_COMPLETED', 0) - at('WORKFLOW_TASK_STARTED', 0));
      add('vendor activity (scheduled → completed)', at('ACTIVITY_TASK_COMPLETED') - at('ACTIVITY_TASK_SCHEDULED'));
      add('workflow task 2 (persist + settle)', at('WORKFLOW_TASK_COMPLETED', 1) - at('WORKFLOW_TASK_STARTED', 1));
      add('waits for a workflow task', at('WORKFLOW_TASK_STARTED', 0) - at('WORKFLOW_TASK_SCHEDULED', 0) + at('WORKFLOW_TASK_STARTED', 1) - at('WORKFLOW_TASK_SCHEDULED', 1));
      add('outside the workflow (API: intake, start, result, response)', run.ms - (wfEnd - wfStart));
    }
    return spans;
  };
  const freshParts = await breakdown(freshRuns.map((r) => ({ workflowId: `analyze:${accountId}:${r.requestId}`, ms: r.ms })));
  const floorParts = await breakdown(floorShapeRuns);
  say(`breakdown, p50 of each part:${' '.repeat(33)}fresh analysis  saga shape, no-op steps`);
  for (const [k, v] of freshParts) say(`  ${k.padEnd(60)} ${pct(v, 50).toFixed(0).padStart(5)} ms  ${pct(floorParts.get(k)!, 50).toFixed(0).padStart(5)} ms`);

  // 1b) Where the machine's CPU goes: per fresh analysis, per direct vendor call and per floor run,
  // each a block of runs in a row, CPU read from /proc (Linux) before and after each block: this
  // process's threads by name (the API, the worker's activities and the simulator share the main
  // thread), and the other processes by name (the Temporal dev server, Postgres, Redis). On a
  // machine whose cores are all busy during a request, CPU anywhere is time on the request's path.
  if (existsSync('/proc/self/task')) {
    const N_CPU = 40;
    const cpuSnapshot = () => {
      const m = new Map<string, number>();
      const add = (k: string, stat: string) => m.set(k, (m.get(k) ?? 0) + cpuMsOf(stat));
      for (const tid of readdirSync('/proc/self/task')) {
        try {
          const t = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
          add(`this process: ${commOf(t).replace(/[-:]?\d+$/, '').replace('tokio-runtime-w', 'Temporal SDK core (tokio)').replace('V8Worker', 'V8 helpers (GC)').replace('WorkerThread', 'workflow thread')}`, t);
        } catch {
          // a thread that ended meanwhile
        }
      }
      for (const pid of readdirSync('/proc')) {
        if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
        try {
          const t = readFileSync(`/proc/${pid}/stat`, 'utf8');
          const name = commOf(t);
          if (/^(temporal|postgres|redis-server)/.test(name)) add(name.startsWith('postgres') ? 'postgres' : name, t);
        } catch {
          // a process that ended meanwhile
        }
      }
      return m;
    };
    const perRun = async (run: (i: number) => Promise<unknown>) => {
      const before = cpuSnapshot();
      const t0 = performance.now();
      for (let i = 0; i < N_CPU; i++) await run(i);
      const wall = (performance.now() - t0) / N_CPU;
      const after = cpuSnapshot();
      const parts = new Map([...after].map(([k, v]) => [k, (v - (before.get(k) ?? 0)) / N_CPU]));
      return { wall, parts, total: [...parts.values()].reduce((a, b) => a + b, 0) };
    };
    const cpuFresh = await perRun(() => post(full(photos[next++]!)));
    const cpuDirect = await perRun(() => client.analyze({ image, system: built.system, prompt: built.prompt, schemaName: 'lenstack_analysis', jsonSchema: schema }));
    const cpuFloor = await perRun((i) => floor('sagaShapeWorkflow', N_FRESH + i));
    say(`CPU per run, ${N_CPU} in a row each (/proc, 10 ms ticks: ±0.3 ms per row and run):  fresh analysis  direct call  saga floor`);
    say(`  wall clock per run${' '.repeat(43)}${cpuFresh.wall.toFixed(1).padStart(8)} ms ${cpuDirect.wall.toFixed(1).padStart(8)} ms ${cpuFloor.wall.toFixed(1).padStart(8)} ms`);
    say(`  CPU, all of it${' '.repeat(47)}${cpuFresh.total.toFixed(1).padStart(8)} ms ${cpuDirect.total.toFixed(1).padStart(8)} ms ${cpuFloor.total.toFixed(1).padStart(8)} ms`);
    const keys = [...cpuFresh.parts.keys()].filter((k) => cpuFresh.parts.get(k)! >= 0.5 || (cpuFloor.parts.get(k) ?? 0) >= 0.5).sort((a, b) => cpuFresh.parts.get(b)! - cpuFresh.parts.get(a)!);
    for (const k of keys) say(`  ${k.padEnd(60)}${cpuFresh.parts.get(k)!.toFixed(1).padStart(8)} ms ${(cpuDirect.parts.get(k) ?? 0).toFixed(1).padStart(8)} ms ${(cpuFloor.parts.get(k) ?? 0).toFixed(1).padStart(8)} ms`);
  }

  // 2) Full cache hits of one analyzed photo.
  const hitPhoto = photos[1]!;
  const hits: number[] = [];
  for (let i = 0; i < N_HIT; i++) {
    const r = await post(full(hitPhoto));
    if (!r.json.meta?.cacheHit) throw new Error('expected a cache hit');
    hits.push(r.ms);
  }
  say(`full cache hit:                    ${fmt(hits)}`);

  // 2b) Full cache hits of a multi-megabyte camera-sized photo, interleaved with the health
  // round trip: what a hit costs over the cheapest request on the same connection path.
  const bigPhoto = (await sharp(PHOTO).resize(4000, 3000).jpeg({ quality: 95 }).toBuffer()).toString('base64');
  await post(full(bigPhoto));
  // And the floor of any JSON API for that body: a bare fastify route (same version, default JSON
  // parser, same body limit) that parses it and answers a small object, on its own port.
  const echo = Fastify({ bodyLimit: config.MAX_BODY_BYTES });
  echo.post('/echo', async (req) => ({ fields: Object.keys(req.body as object).length }));
  const echoBase = await echo.listen({ host: '127.0.0.1', port: 0 });
  const bigPayload = Buffer.from(JSON.stringify(full(bigPhoto)));
  const bigBytes = Buffer.from(bigPhoto, 'base64');
  // The same photo as binary: once as a finished upload (POST /v1/uploads, tus) named by its id,
  // and as a multipart part in each request (`curl -F photo=@…`), which stores it as a new upload.
  const created = await fetch(`${base}/v1/uploads`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'tus-resumable': '1.0.0', 'upload-length': String(bigBytes.length) },
  });
  const uploadUrl = new URL(created.headers.get('location')!, base).toString();
  const patched = await fetch(uploadUrl, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${key}`, 'tus-resumable': '1.0.0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' },
    body: bigBytes,
  });
  if (patched.status !== 204) throw new Error(`upload PATCH answered ${patched.status}`);
  const uploadId = uploadUrl.split('/').pop()!;
  const byUpload = { images: [{ uploadId }], preset: 'full-analysis' };
  const multipart = async () => {
    const form = new FormData();
    form.append('request', JSON.stringify({ preset: 'full-analysis' }));
    form.append('photo', new Blob([bigBytes], { type: 'image/jpeg' }), 'big.jpg');
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/analyze`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
    const json = (await res.json()) as { meta?: { cacheHit?: boolean } };
    if (res.status !== 200 || !json.meta?.cacheHit) throw new Error(`multipart: expected a cache hit, got ${res.status}`);
    return performance.now() - t0;
  };
  const bigHits: number[] = [];
  const uploadHits: number[] = [];
  const multipartHits: number[] = [];
  const healths: number[] = [];
  const echoes: number[] = [];
  for (let i = 0; i < N_BIG_HIT; i++) {
    const r = await post(full(bigPhoto));
    if (!r.json.meta?.cacheHit) throw new Error('expected a cache hit');
    bigHits.push(r.ms);
    const u = await post(byUpload);
    if (!u.json.meta?.cacheHit) throw new Error('expected a cache hit by upload id');
    uploadHits.push(u.ms);
    multipartHits.push(await multipart());
    let t0 = performance.now();
    const h = await fetch(`${base}/v1/health`);
    await h.arrayBuffer();
    healths.push(performance.now() - t0);
    t0 = performance.now();
    const e = await fetch(`${echoBase}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bigPayload });
    await e.json();
    echoes.push(performance.now() - t0);
  }
  await echo.close();
  const bigMb = (Buffer.byteLength(bigPhoto, 'base64') / 1e6).toFixed(1);
  say(`full cache hit, 4000×3000 photo (${bigMb} MB): ${fmt(bigHits)}`);
  say(`GET /v1/health, interleaved:       ${fmt(healths)}`);
  say(`bare fastify JSON echo of the same body, interleaved: ${fmt(echoes)}`);
  say(`  the hit over the health round trip (p50 diff): ${(pct(bigHits, 50) - pct(healths, 50)).toFixed(1)} ms`);
  say(`  the echo over the health round trip (p50 diff): ${(pct(echoes, 50) - pct(healths, 50)).toFixed(1)} ms`);
  say(`  the hit over the echo (p50 diff: Lenstack's own part): ${(pct(bigHits, 50) - pct(echoes, 50)).toFixed(1)} ms`);
  say(`full cache hit, the same photo named by its upload id (uploaded once): ${fmt(uploadHits)}`);
  say(`  over the health round trip (p50 diff): ${(pct(uploadHits, 50) - pct(healths, 50)).toFixed(1)} ms`);
  say(`full cache hit, the same photo as a multipart part (stored as a new upload each time): ${fmt(multipartHits)}`);
  say(`  over the health round trip (p50 diff): ${(pct(multipartHits, 50) - pct(healths, 50)).toFixed(1)} ms`);

  // 3) Throughput with 20 concurrent clients.
  const run = async (n: number, body: () => Record<string, unknown>) => {
    let left = n;
    const lat: number[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) lat.push((await post(body())).ms);
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    return { rps: n / secs, lat };
  };
  const freshTp = await run(N_THROUGHPUT, () => full(photos[next++]!));
  say(`throughput, fresh, ${CONCURRENCY} clients:      ${freshTp.rps.toFixed(1)} req/s  (${fmt(freshTp.lat)})`);
  const hitTp = await run(N_HIT, () => full(hitPhoto));
  say(`throughput, cache hits, ${CONCURRENCY} clients: ${hitTp.rps.toFixed(1)} req/s  (${fmt(hitTp.lat)})`);

  // 4) Vehicle report: 50 photos vs 1 photo, vendor latency 800 ms, interleaved.
  sim.setBehaviour('all', { latencyMs: 800 });
  const one: number[] = [];
  const fifty: number[] = [];
  for (let round = 0; round < 3; round++) {
    const single = await post({ images: [{ base64: photos[next++]! }], preset: 'vehicle-condition' });
    one.push(single.ms);
    const many = await post({ images: Array.from({ length: 50 }, (_, i) => ({ base64: photos[(round * 50 + i) % N_FRESH + 10]! })), preset: 'vehicle-condition', refresh: true });
    fifty.push(many.ms);
  }
  say('');
  say('# Vehicle report (simulated vendor latency 800 ms per call)');
  say(`1-photo report:  ${fmt(one)}`);
  say(`50-photo report: ${fmt(fifty)}`);
  say(`ratio (p50):     ${(pct(fifty, 50) / pct(one, 50)).toFixed(2)}×  (target ≤ 4×)`);
} finally {
  await mkdir(path.join(ROOT, 'bench/results'), { recursive: true });
  await writeFile(path.join(ROOT, 'bench/results/analyze.txt'), lines.join('\n') + '\n');
  await app.close();
  await worker.shutdown();
  floorWorker.shutdown();
  await floorRunning;
  await floorConnection.close();
  await connection.close();
  await db.end();
  await sim.close();
  await temporalServer.stop();
  await dropDatabase(config.DATABASE_URL);
  await rm(blobDir, { recursive: true, force: true });
}
