/**
 * Vehicle batches end to end (npx tsx bench/batch-vehicles.ts [vehicles=40] [photosPerVehicle=6]):
 * a batch of V vehicles of P distinct photos each with 800 ms simulated vendor latency. Every
 * vehicle costs P photo calls and one synthesis call; the batch may keep BATCH_CONCURRENCY calls in
 * flight, so the ideal is V × (P + 1) × latency ÷ BATCH_CONCURRENCY. Real Postgres, Redis, a
 * Temporal dev server, an in-process worker, the simulated vendors (bench/batch-stack.ts).
 * Writes bench/results/batch-vehicles-{V}x{P}.txt.
 */
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BATCH_CONCURRENCY } from '../batches/submit.ts';
import { startBatchStack } from './batch-stack.ts';
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

const { sim, base, key, close } = await startBatchStack('vehicles');

try {
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
  await close();
}
