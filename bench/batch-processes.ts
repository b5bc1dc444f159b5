/**
 * Peak memory of the API and of the worker, each its own process as `npm start` runs them, over a
 * 100-photo and an N-photo batch (npx tsx bench/batch-processes.ts [photos=1000]). Each batch gets
 * fresh API and worker processes; their peak RSS is the kernel's VmHWM, read from /proc just
 * before they stop. 800 ms simulated vendor latency, lens `dating`, distinct 320×240 photos.
 * Writes bench/results/batch-processes.txt.
 */
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { grant } from '../credits/ledger.ts';
import { distinctPhotos } from './distinct-photos.ts';
import { startProcessStack } from './process-stack.ts';

const N = Number(process.argv[2] ?? 1000);
const LATENCY_MS = 800;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

const stack = await startProcessStack('batchp');
const { db, sim } = stack;
const hwmMb = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;


try {
  const { accountId } = await createBillingAccount(db, 'bench-batchp@example.test');
  const { key } = await issueKey(db, accountId, 'live');
  await grant(db, { accountId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
  sim.setBehaviour('all', { latencyMs: LATENCY_MS });

  const run = async (photos: string[]) => {
    const worker = await stack.start('worker/main.ts', {}, /polling task queue/);
    const { child: api, base } = await stack.startApi();
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
    await stack.stop(api);
    await stack.stop(worker);
    return result;
  };

  say(`batch memory by process, ${new Date().toISOString().slice(0, 10)}, node ${process.version}; vendor latency ${LATENCY_MS} ms; fresh API and worker processes per batch; peak RSS = VmHWM`);
  const small = await run(await distinctPhotos(0, 100));
  const large = await run(await distinctPhotos(100, N));
  say(`100 photos: ${(small.ms / 1000).toFixed(1)} s; API peak ${small.apiMb.toFixed(0)} MB, worker peak ${small.workerMb.toFixed(0)} MB`);
  say(`${N} photos: ${(large.ms / 1000).toFixed(1)} s; API peak ${large.apiMb.toFixed(0)} MB, worker peak ${large.workerMb.toFixed(0)} MB`);
  say(`${N} / 100 photos: API ${(large.apiMb / small.apiMb).toFixed(2)}×, worker ${(large.workerMb / small.workerMb).toFixed(2)}× (target ≤ 1.5×)`);
  await writeFile(path.join(stack.root, 'bench/results/batch-processes.txt'), lines.join('\n') + '\n');
} finally {
  await stack.close();
}
