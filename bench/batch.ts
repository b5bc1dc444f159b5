/**
 * Batches end to end (npx tsx bench/batch.ts [photos=1000]):
 *  - a batch of N distinct photos with 800 ms simulated vendor latency: completion time against the
 *    ideal N × latency ÷ the batch's concurrency
 *  - peak RSS of the process (API and worker in one, as `npm start` runs them) during a 100-photo
 *    and an N-photo batch: flat means the batch does not hold its photos in memory
 *  - history events of the longest workflow run (continue-as-new keeps it bounded)
 * Real Postgres, Redis, a Temporal dev server, an in-process worker, the simulated vendors.
 * Writes bench/results/batch.txt. bench/batch-processes.ts measures the API's and the worker's
 * memory each in its own process.
 */
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BATCH_CONCURRENCY } from '../batches/submit.ts';
import { startBatchStack } from './batch-stack.ts';
import { distinctPhotos } from './distinct-photos.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const N = Number(process.argv[2] ?? 1000);
const LATENCY_MS = 800;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

const { config, temporal, sim, base, accountId, key, close } = await startBatchStack('batch');

try {
  sim.setBehaviour('all', { latencyMs: LATENCY_MS });
  const runBatch = async (photos: string[]) => {
    const payload = JSON.stringify({ modules: ['dating'], items: photos.map((b, i) => ({ base64: b, name: `photo-${i}.jpg` })) });
    let peak = process.memoryUsage().rss;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: payload });
    const batch = (await res.json()) as { id: string };
    if (res.status !== 202) throw new Error(`HTTP ${res.status}: ${JSON.stringify(batch)}`);
    const submitted = performance.now() - t0;
    let status: { status: string; counts: { done: number; failed: number } };
    for (;;) {
      status = (await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: { authorization: `Bearer ${key}` } })).json()) as typeof status;
      if (status.status === 'completed') break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const ms = performance.now() - t0;
    clearInterval(sampler);
    let maxEvents = 0;
    let runs = 0;
    for await (const w of temporal.workflow.list({ query: `WorkflowId = 'batch:${accountId}:${batch.id}'` })) {
      runs++;
      const h = await temporal.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
      maxEvents = Math.max(maxEvents, h.events?.length ?? 0);
    }
    return { id: batch.id, ms, submitted, peakMb: peak / 2 ** 20, done: status.counts.done, failed: status.counts.failed, runs, maxEvents };
  };

  say(`batch bench, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores; vendor latency ${LATENCY_MS} ms, batch concurrency ${BATCH_CONCURRENCY}, ${config.BATCH_PHOTOS_PER_RUN} photos per workflow run`);
  const small = await runBatch(await distinctPhotos(0, 100));
  const large = await runBatch(await distinctPhotos(100, N));
  for (const [name, r, n] of [['100 photos', small, 100], [`${N} photos`, large, N]] as const) {
    const ideal = (n * LATENCY_MS) / BATCH_CONCURRENCY;
    say(
      `${name.padEnd(12)} done ${r.done}, failed ${r.failed}; submit ${(r.submitted / 1000).toFixed(1)} s, complete ${(r.ms / 1000).toFixed(1)} s; ideal ${(ideal / 1000).toFixed(1)} s → ${(r.ms / ideal).toFixed(2)}×; peak RSS ${r.peakMb.toFixed(0)} MB; ${r.runs} workflow runs, longest history ${r.maxEvents} events`,
    );
  }
  say(`peak RSS ${N} / 100 photos: ${(large.peakMb / small.peakMb).toFixed(2)}× (target ≤ 1.5×); completion against ideal at ${N}: ${(large.ms / ((N * LATENCY_MS) / BATCH_CONCURRENCY)).toFixed(2)}× (target ≤ 1.3×)`);
  await writeFile(path.join(ROOT, 'bench/results/batch.txt'), lines.join('\n') + '\n');
} finally {
  await close();
}
