/**
 * Vendor quotas (npx tsx bench/quota.ts [photos=2000] [--batches=6] [--unpaced] [--overflow]): N
 * distinct photos in batches plus a steady trickle of interactive analyses, against a simulated openai
 * limited to 600 requests a minute, over two worker processes and one API process, as `npm start`
 * runs them. Prints:
 *  - achieved vendor throughput while the batch ran, as % of the vendor's limit (target ≥ 95 %)
 *  - the share of vendor calls answered 429 (target ≤ 1 %)
 *  - interactive p95 latency with the batch running against the same trickle with none (≤ 1.2×)
 *  - calls the second vendor (anthropic, its own 600 a minute) took: none unless --overflow
 * One batch keeps at most 4 photos in flight (BATCH_CONCURRENCY), which on this 2-core machine
 * under load (~0.5 s of Temporal and database work per photo) cannot offer 600 calls a minute, nor
 * can the workspace's default 8; --batches=K (default 6) splits the N photos into K batches of one
 * workspace submitted together, with BATCH_WORKSPACE_CONCURRENCY=4K, so the vendor is the bottleneck.
 * The workers' own metrics give the wait for the vendor budget by lane (interactive, batch): the
 * part of the interactive latency the budget is answerable for.
 * --unpaced: the workers are given no OPENAI_RPM (only the vendor's 429s pace them), as before
 * issue 27. Writes bench/results/quota-{N}x{K}[-unpaced][-overflow].txt.
 */
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { grant } from '../credits/ledger.ts';
import { freePort } from '../tools/scripts/temporal.ts';
import { distinctPhotos } from './distinct-photos.ts';
import { startProcessStack } from './process-stack.ts';

const args = process.argv.slice(2);
const N = Number(args.find((a) => /^\d+$/.test(a)) ?? 2000);
const UNPACED = args.includes('--unpaced');
const OVERFLOW = args.includes('--overflow');
const BATCHES = Number(/^--batches=(\d+)$/.exec(args.find((a) => a.startsWith('--batches=')) ?? '')?.[1] ?? 6);
const RPM = 600;
const LATENCY_MS = 50;
/** One interactive analysis every this many ms, with the batch and without. */
const TRICKLE_EVERY_MS = 2000;
const BASELINE_REQUESTS = 30;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

const okAt: Record<string, number[]> = { openai: [], anthropic: [] };
const stack = await startProcessStack('quota', {
  sim: {
    behaviour: { latencyMs: LATENCY_MS },
    limits: { openai: { rpm: RPM }, anthropic: { rpm: RPM } },
    log: (line) => {
      const m = /^\[SIM\] (openai|anthropic) .* ok \d+ ms$/.exec(line);
      if (m) okAt[m[1]!]!.push(Date.now());
    },
  },
  env: {
    VENDOR_ORDER: 'openai,anthropic',
    OPENAI_RPM: UNPACED ? '' : String(RPM),
    ANTHROPIC_RPM: UNPACED ? '' : String(RPM),
    VENDOR_OVERFLOW: OVERFLOW ? 'true' : 'false',
    // Every batch of the workspace its four photos in flight.
    BATCH_WORKSPACE_CONCURRENCY: String(4 * BATCHES),
  },
});
const { db, sim } = stack;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length * 0.95) - 1)]!;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

try {
  const { accountId: batchAccount } = await createBillingAccount(db, 'bench-quota-batch@example.test');
  const batchKey = (await issueKey(db, batchAccount, 'live')).key;
  await grant(db, { accountId: batchAccount, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
  const { accountId: liveAccount } = await createBillingAccount(db, 'bench-quota-live@example.test');
  const liveKey = (await issueKey(db, liveAccount, 'live')).key;
  await grant(db, { accountId: liveAccount, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });

  const metricsPorts = [await freePort(), await freePort()];
  for (const mp of metricsPorts) await stack.start('worker/main.ts', { WORKER_METRICS_PORT: String(mp) }, /polling task queue/);
  /** Sum and count of the budget wait histogram by lane, over both workers. */
  const budgetWaits = async () => {
    const out: Record<string, { sum: number; count: number; over100ms: number }> = {};
    for (const mp of metricsPorts) {
      const text = await (await fetch(`http://127.0.0.1:${mp}/metrics`)).text();
      for (const m of text.matchAll(/^lenstack_vendor_budget_wait_seconds_(sum|count|bucket)\{([^}]*)\} (\S+)$/gm)) {
        const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
        if (labels.vendor !== 'openai') continue;
        const lane = (out[labels.lane!] ??= { sum: 0, count: 0, over100ms: 0 });
        if (m[1] === 'sum') lane.sum += Number(m[3]);
        if (m[1] === 'count') lane.count += Number(m[3]);
        if (m[1] === 'bucket' && labels.le === '0.1') lane.over100ms -= Number(m[3]);
      }
    }
    for (const lane of Object.values(out)) lane.over100ms += lane.count;
    return out;
  };
  const { base } = await stack.startApi();

  const batchPhotos = await distinctPhotos(0, N);
  const trickle = await distinctPhotos(N, BASELINE_REQUESTS + Math.ceil((N / (RPM / 60)) * 1000 / TRICKLE_EVERY_MS) * 2 + 20);
  let next = 0;
  const interactive = async (): Promise<{ ms: number; vendor: string }> => {
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/analyze`, {
      method: 'POST',
      headers: { authorization: `Bearer ${liveKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ imageBase64: trickle[next++], modules: ['dating'] }),
    });
    const body = (await res.json()) as { meta?: { vendor: string } };
    if (res.status !== 200) throw new Error(`interactive HTTP ${res.status}: ${JSON.stringify(body)}`);
    return { ms: performance.now() - t0, vendor: body.meta!.vendor };
  };
  /** One interactive analysis every TRICKLE_EVERY_MS until `until()` says stop; their latencies. */
  const runTrickle = async (until: () => boolean) => {
    const pending: Array<Promise<{ ms: number; vendor: string }>> = [];
    while (!until()) {
      pending.push(interactive());
      await sleep(TRICKLE_EVERY_MS);
    }
    return Promise.all(pending);
  };

  say(`vendor quota bench, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at start`);
  say(`simulated openai and anthropic each limited to ${RPM} requests/minute (sliding 60 s window), ${LATENCY_MS} ms latency; VENDOR_ORDER=openai,anthropic; workers: 2 processes${UNPACED ? ', NO OPENAI_RPM (unpaced)' : `, OPENAI_RPM=ANTHROPIC_RPM=${RPM}`}, VENDOR_OVERFLOW=${OVERFLOW}`);

  // 1. The trickle alone.
  let sent = 0;
  const alone = await runTrickle(() => sent++ >= BASELINE_REQUESTS);
  const baseline = alone.map((r) => r.ms);
  await sleep(2000);
  sim.reset();
  sim.setBehaviour('all', { latencyMs: LATENCY_MS });
  okAt.openai!.length = 0;
  okAt.anthropic!.length = 0;

  // 2. The batches, with the trickle beside them.
  const t0 = Date.now();
  const per = Math.ceil(N / BATCHES);
  const ids = await Promise.all(
    Array.from({ length: BATCHES }, async (_, k) => {
      const items = batchPhotos.slice(k * per, (k + 1) * per).map((b, i) => ({ base64: b, name: `photo-${k * per + i}.jpg` }));
      const res = await fetch(`${base}/v1/batches`, {
        method: 'POST',
        headers: { authorization: `Bearer ${batchKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ modules: ['dating'], items }),
      });
      const batch = (await res.json()) as { id: string };
      if (res.status !== 202) throw new Error(`HTTP ${res.status}: ${JSON.stringify(batch)}`);
      return batch.id;
    }),
  );
  const submitted = Date.now();
  let done = false;
  const counts = { done: 0, failed: 0 };
  const watcher = (async () => {
    for (const id of ids) {
      for (;;) {
        const status = (await (await fetch(`${base}/v1/batches/${id}`, { headers: { authorization: `Bearer ${batchKey}` } })).json()) as { status: string; counts: { done: number; failed: number } };
        if (status.status === 'completed') {
          counts.done += status.counts.done;
          counts.failed += status.counts.failed;
          break;
        }
        await sleep(500);
      }
    }
    done = true;
  })();
  const during = await runTrickle(() => done);
  await watcher;
  const completed = Date.now();
  const stats = sim.stats();
  const waits = await budgetWaits();

  // Throughput: successful openai calls between the batch's first and last, per minute.
  const calls = okAt.openai!.filter((t) => t >= submitted && t <= completed);
  const span = (calls.at(-1)! - calls[0]!) / 60_000;
  const perMinute = (calls.length - 1) / span;
  const all = (['openai', 'anthropic', 'google'] as const).reduce((n, v) => n + stats[v].calls, 0);
  const limited = (['openai', 'anthropic', 'google'] as const).reduce((n, v) => n + stats[v].rateLimited, 0);
  const withBatch = during.map((r) => r.ms);

  say(`${N} photos in ${BATCHES} batch(es): submitted in ${((submitted - t0) / 1000).toFixed(1)} s, completed ${((completed - submitted) / 1000).toFixed(1)} s later; done ${counts.done}, failed ${counts.failed}`);
  // And in 10-second steps from the first call: the median step is the steady rate, without the
  // ramp-up and the tail where the last batch runs alone.
  const steps: number[] = [];
  for (let from = calls[0]!; from + 10_000 <= calls.at(-1)!; from += 10_000) steps.push(calls.filter((t) => t >= from && t < from + 10_000).length * 6);
  const fullWindows = calls.filter((t) => t - calls[0]! >= 60_000).map((t) => calls.filter((u) => u > t - 60_000 && u <= t).length);
  say(`openai throughput while the batches ran: ${perMinute.toFixed(1)} calls/minute over ${(span * 60).toFixed(1)} s = ${((perMinute / RPM) * 100).toFixed(1)} % of its ${RPM} limit (target ≥ 95 %)`);
  say(`  in 10 s steps: median ${median(steps).toFixed(0)} calls/minute = ${((median(steps) / RPM) * 100).toFixed(1)} % (min ${Math.min(...steps)}, max ${Math.max(...steps)}); busiest 60 s window: ${fullWindows.length ? Math.max(...fullWindows) : 'n/a'} calls`);
  say(`vendor calls answered 429: ${limited} of ${all} = ${((limited / all) * 100).toFixed(2)} % (target ≤ 1 %); by vendor: ${(['openai', 'anthropic'] as const).map((v) => `${v} ${stats[v].rateLimited}/${stats[v].calls}`).join(', ')}`);
  say(`second vendor (anthropic) succeeded calls during the batch: ${stats.anthropic.succeeded} (VENDOR_OVERFLOW=${OVERFLOW})`);
  say(
    `interactive latency, ${withBatch.length} requests with the batch vs ${baseline.length} alone: p95 ${p95(withBatch).toFixed(0)} ms vs ${p95(baseline).toFixed(0)} ms = ${(p95(withBatch) / p95(baseline)).toFixed(2)}× (target ≤ 1.2×); median ${median(withBatch).toFixed(0)} vs ${median(baseline).toFixed(0)} ms`,
  );
  say(
    `wait for the vendor budget (both workers, whole run): ${Object.entries(waits)
      .map(([lane, w]) => `${lane} ${w.count} calls, mean ${((w.sum / Math.max(1, w.count)) * 1000).toFixed(0)} ms, ${w.over100ms} over 100 ms`)
      .join('; ')}`,
  );
  say(`load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at the end`);
  await writeFile(path.join(stack.root, `bench/results/quota-${N}x${BATCHES}${UNPACED ? '-unpaced' : ''}${OVERFLOW ? '-overflow' : ''}.txt`), lines.join('\n') + '\n');
} finally {
  await stack.close();
}
