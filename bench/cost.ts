/**
 * What a photo costs (npx tsx bench/cost.ts [photos=100]): full-analysis on N distinct photos
 * through the real stack (an API process and a worker process as `npm start` runs them, Postgres,
 * Redis, a Temporal dev server, the simulated vendors), once per vendor with the caching hints on
 * and once with VENDOR_PROMPT_CACHE=off. Each run is a fresh account (so every photo is new to
 * it), a fresh worker with VENDOR_ORDER=<vendor>, and a cold simulated prompt cache. Prints per
 * vendor and run, per photo: input tokens (all), of them cached and written to the cache, output
 * tokens, from the worker's lenstack_vendor_tokens; credits charged to the customer (from the
 * answers: equal in both runs); CPU ms in the API (lenstack_analysis_cpu_milliseconds) and in the
 * worker (lenstack_activity_cpu_milliseconds, every activity). Writes bench/results/cost-{N}.txt.
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

const N = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 100);
const CONCURRENCY = 4;
const VENDORS = ['openai', 'anthropic', 'google'] as const;
type Vendor = (typeof VENDORS)[number];
/**
 * What a cached or cache-written input token costs against an uncached one, from the vendors'
 * price pages for the default models (OPENAI_MODEL gpt-4.1-mini, claude-sonnet-4-6 with 5-minute
 * writes, gemini-2.5-flash implicit caching) when this was written: a reading aid for the token
 * counts, not a price book. Check your own models' rates.
 */
const RATE: Record<Vendor, { cached: number; write: number }> = {
  openai: { cached: 0.25, write: 1 },
  anthropic: { cached: 0.1, write: 1.25 },
  google: { cached: 0.1, write: 1 },
};

const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

const stack = await startProcessStack('cost', { env: { API_METRICS: 'public' } });
const { db, sim } = stack;

/** Sums of a histogram's _sum and _count series whose labels match `where`, in one scrape. */
function histogram(text: string, name: string, where: Record<string, string> = {}): { sum: number; count: number } {
  const out = { sum: 0, count: 0 };
  for (const m of text.matchAll(new RegExp(`^${name}_(sum|count)\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(where).some(([k, v]) => labels[k] !== v)) continue;
    out[m[1] as 'sum' | 'count'] += Number(m[3]);
  }
  return out;
}

interface Run {
  vendor: Vendor;
  hint: 'on' | 'off';
  input: number;
  cached: number;
  written: number;
  output: number;
  credits: number;
  apiCpuMs: number;
  workerCpuMs: number;
  seconds: number;
}

try {
  const { base } = await stack.startApi();
  const photos = await distinctPhotos(0, N);
  say(`cost bench, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at start`);
  say(`full-analysis on ${N} distinct 320×240 JPEGs per run, ${CONCURRENCY} requests at a time; one API and one worker process; simulated vendors (tools/sim/prompt-cache.ts plays their caches)`);

  const runs: Run[] = [];
  for (const hint of ['on', 'off'] as const) {
    for (const vendor of VENDORS) {
      sim.reset();
      const metricsPort = await freePort();
      const worker = await stack.start('worker/main.ts', { VENDOR_ORDER: vendor, VENDOR_PROMPT_CACHE: hint, WORKER_METRICS_PORT: String(metricsPort) }, /polling task queue/);
      const { accountId } = await createBillingAccount(db, `bench-cost-${vendor}-${hint}@example.test`);
      const key = (await issueKey(db, accountId, 'live')).key;
      await grant(db, { accountId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
      const apiBefore = await (await fetch(`${base}/metrics`)).text();

      const t0 = performance.now();
      let credits = 0;
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < photos.length) {
            const imageBase64 = photos[next++]!;
            const res = await fetch(`${base}/v1/analyze`, {
              method: 'POST',
              headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
              body: JSON.stringify({ imageBase64, preset: 'full-analysis' }),
            });
            const body = (await res.json()) as { usage?: { creditsCharged?: number }; meta?: { vendor: string } };
            if (res.status !== 200 || body.meta?.vendor !== vendor) throw new Error(`HTTP ${res.status} from ${body.meta?.vendor}: ${JSON.stringify(body).slice(0, 500)}`);
            credits += body.usage?.creditsCharged ?? 0;
          }
        }),
      );
      const seconds = (performance.now() - t0) / 1000;

      const workerText = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const apiAfter = await (await fetch(`${base}/metrics`)).text();
      const tokens = (kind: string) => histogram(workerText, 'lenstack_vendor_tokens', { vendor, task: 'lenses', stack: 'full-analysis', kind });
      const input = tokens('input');
      if (input.count !== N) throw new Error(`${vendor}: ${input.count} vendor calls recorded for ${N} photos`);
      const apiCpu = (text: string) => histogram(text, 'lenstack_analysis_cpu_milliseconds', { outcome: 'analyzed' });
      runs.push({
        vendor,
        hint,
        input: input.sum / N,
        cached: tokens('cached_input').sum / N,
        written: tokens('cache_write_input').sum / N,
        output: tokens('output').sum / N,
        credits,
        apiCpuMs: (apiCpu(apiAfter).sum - apiCpu(apiBefore).sum) / N,
        workerCpuMs: histogram(workerText, 'lenstack_activity_cpu_milliseconds').sum / N,
        seconds,
      });
      await stack.stop(worker);
    }
  }

  say('');
  say('per photo (means over the run)      input  of it cached  written  output | credits charged | CPU ms: API  worker | run');
  for (const r of runs) {
    say(
      `${r.vendor.padEnd(9)} hint ${r.hint.padEnd(3)}            ${r.input.toFixed(0).padStart(10)} ${r.cached.toFixed(0).padStart(13)} ${r.written.toFixed(0).padStart(8)} ${r.output.toFixed(0).padStart(7)} | ${String(r.credits).padStart(7)} (${(r.credits / N).toFixed(0)}/photo) | ${r.apiCpuMs.toFixed(1).padStart(8)} ${r.workerCpuMs.toFixed(1).padStart(7)} | ${r.seconds.toFixed(1)} s`,
    );
  }
  say('');
  say('input billed, in uncached-token equivalents per photo (cached and written tokens at the RATE multipliers in bench/cost.ts):');
  for (const vendor of VENDORS) {
    const [on, off] = (['on', 'off'] as const).map((h) => runs.find((r) => r.vendor === vendor && r.hint === h)!);
    const billed = (r: Run) => r.input - r.cached - r.written + r.cached * RATE[vendor].cached + r.written * RATE[vendor].write;
    say(`  ${vendor.padEnd(9)} hint on ${billed(on!).toFixed(0)}, off ${billed(off!).toFixed(0)} (${(((billed(on!) - billed(off!)) / billed(off!)) * 100).toFixed(1)} %); credits ${on!.credits} vs ${off!.credits}${on!.credits === off!.credits ? ' (equal)' : ' (DIFFERENT)'}`);
    if (on!.credits !== off!.credits) throw new Error(`${vendor}: credits charged differ with and without the caching hint`);
  }
  say(`load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at the end`);
  await writeFile(path.join(stack.root, `bench/results/cost-${N}.txt`), lines.join('\n') + '\n');
} finally {
  await stack.close();
}
