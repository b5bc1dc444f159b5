/**
 * Vehicle batches end to end (npx tsx bench/batch-vehicles.ts [vehicles=40] [photosPerVehicle=6]):
 * a batch of V vehicles of P distinct photos each with 800 ms simulated vendor latency. Every
 * vehicle costs P photo calls and one synthesis call; the batch may keep BATCH_CONCURRENCY calls in
 * flight, so the ideal is V × (P + 1) × latency ÷ BATCH_CONCURRENCY. Also printed: the fastest a
 * single vehicle can go (its photo calls all at once, then the synthesis: 2 × latency), to show
 * what each vehicle waited. Real Postgres, Redis, a Temporal dev server, an in-process worker, the
 * simulated vendors. Writes bench/results/batch-vehicles-{V}x{P}.txt.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { buildApp } from '../api/app.ts';
import { KeyCache } from '../auth/cache.ts';
import { createUser, issueKey } from '../auth/repository.ts';
import { BATCH_CONCURRENCY } from '../batches/submit.ts';
import { loadConfig } from '../core/config.ts';
import { grant } from '../credits/ledger.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { FsBlobStore } from '../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { startTemporalDevServer } from '../tools/scripts/temporal.ts';
import { startSimVendor } from '../tools/sim/index.ts';
import { startWorker } from '../worker/main.ts';
import { distinctPhotos } from './distinct-photos.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const V = Number(process.argv[2] ?? 40);
const P = Number(process.argv[3] ?? 6);
const LATENCY_MS = 800;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

Runtime.install({ logger: new DefaultLogger('ERROR') });
const dbName = `lenstack_bench_vehicles_${process.pid}`;
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
const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
const app = await buildApp({ fetchPolicy: PUBLIC_INTERNET, config, db, keyCache: new KeyCache(), blobs: new FsBlobStore(blobDir), temporal });
const base = await app.listen({ host: '127.0.0.1', port: 0 });

try {
  const { userId } = await createUser(db, 'bench-vehicles@example.test');
  const { key } = await issueKey(db, userId, 'live');
  await grant(db, { userId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
  sim.setBehaviour('all', { latencyMs: LATENCY_MS });
  const photos = await distinctPhotos(0, V * P);
  const vehicles = Array.from({ length: V }, (_, v) => ({
    vehicle: { vin: `BENCH${String(v).padStart(12, '0')}`, mileage: 10_000 + v },
    items: photos.slice(v * P, (v + 1) * P).map((b, j) => ({ base64: b, name: `v${v}-${j}.jpg` })),
  }));
  const auth = { authorization: `Bearer ${key}` };
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/batches`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ vehicles }) });
  const batch = (await res.json()) as { id: string };
  if (res.status !== 202) throw new Error(`HTTP ${res.status}: ${JSON.stringify(batch)}`);
  const submitted = performance.now() - t0;
  let status: { status: string; counts: { done: number; failed: number }; creditsCharged?: number };
  for (;;) {
    status = (await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: auth })).json()) as typeof status;
    if (status.status === 'completed') break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const ms = performance.now() - t0;
  const items = (await (await fetch(`${base}/v1/batches/${batch.id}/items?limit=${V}`, { headers: auth })).json()) as { items: { output?: { photos?: unknown[] } }[] };
  const wellFormed = items.items.filter((i) => i.output?.photos?.length === P).length;
  const ideal = (V * (P + 1) * LATENCY_MS) / BATCH_CONCURRENCY;
  say(`vehicle batch bench, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores; vendor latency ${LATENCY_MS} ms, batch concurrency ${BATCH_CONCURRENCY} calls`);
  say(`${V} vehicles × ${P} photos: done ${status.counts.done}, failed ${status.counts.failed}, reports with ${P} photo entries ${wellFormed}/${V}`);
  say(`submit ${(submitted / 1000).toFixed(1)} s, complete ${(ms / 1000).toFixed(1)} s; ideal ${V} × ${P + 1} calls × ${LATENCY_MS} ms ÷ ${BATCH_CONCURRENCY} = ${(ideal / 1000).toFixed(1)} s → ${(ms / ideal).toFixed(2)}× (target ≤ 1.3×)`);
  await writeFile(path.join(ROOT, `bench/results/batch-vehicles-${V}x${P}.txt`), lines.join('\n') + '\n');
} finally {
  await app.close();
  await worker.shutdown();
  await connection.close();
  await db.end();
  await sim.close();
  await temporalServer.stop();
  await dropDatabase(config.DATABASE_URL);
  await rm(blobDir, { recursive: true, force: true });
}
