/**
 * What the console's request log costs a request (npx tsx bench/request-log.ts): two API apps on
 * one scratch database, side by side in one run, requests interleaved one to one so the machine's
 * load falls on both alike:
 *  - "log on": the request log as the API runs it (requestlog/buffer.ts: a push per request, one
 *    multi-row INSERT a second);
 *  - "log off": the same app whose request log holds nothing (capacity 0: the hook runs, every row
 *    is dropped at once, nothing is written).
 * Requests: an authenticated cheap read (GET /v1/modules) and a refused analysis (400, its error
 * envelope kept), over real HTTP. Writes bench/results/request-log.txt.
 */
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../api/app.ts';
import { KeyCache } from '../auth/cache.ts';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { loadConfig } from '../core/config.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { FsBlobStore } from '../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { RequestLog } from '../requestlog/buffer.ts';
import { createApiMetrics } from '../metrics/api.ts';
import { noRateLimits, unreachableTemporal } from '../test/helpers/deps.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const N_READ = 3000;
const N_REFUSED = 600;
const CLIENTS = 8;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const fmt = (xs: number[]) => `p50 ${pct(xs, 50).toFixed(2)} ms  p99 ${pct(xs, 99).toFixed(2)} ms  (n=${xs.length})`;
const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};

const dbName = `lenstack_bench_reqlog_${process.pid}`;
const blobDir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-bench-'));
const config = loadConfig({
  ...process.env,
  DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${dbName}`,
  REDIS_PREFIX: `lenstack-bench-${process.pid}:`,
  BLOB_DIR: blobDir,
  LOG_LEVEL: 'silent',
});
await createDatabaseIfMissing(config.DATABASE_URL);
await migrate(config.DATABASE_URL);
const db = createPool(config.DATABASE_URL, { max: 20 });
const common = { fetchPolicy: PUBLIC_INTERNET, config, db, keyCache: new KeyCache(), blobs: new FsBlobStore(blobDir), temporal: unreachableTemporal(), rateLimiter: noRateLimits, metrics: createApiMetrics() };
const on = await buildApp(common);
const off = await buildApp({ ...common, requestLog: new RequestLog(db, { capacity: 0 }) });
const bases = { on: await on.listen({ host: '127.0.0.1', port: 0 }), off: await off.listen({ host: '127.0.0.1', port: 0 }) };

try {
  const { accountId } = await createBillingAccount(db, 'bench@example.test');
  const { key } = await issueKey(db, accountId, 'live');
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const refusedBody = JSON.stringify({ imageUrl: 'https://example.com/a.jpg', modules: ['no-such-lens'] });
  const timed = async (base: string, kind: 'read' | 'refused'): Promise<number> => {
    const t0 = performance.now();
    const res =
      kind === 'read'
        ? await fetch(`${base}/v1/modules`, { headers })
        : await fetch(`${base}/v1/analyze`, { method: 'POST', headers, body: refusedBody });
    await res.arrayBuffer();
    if (res.status !== (kind === 'read' ? 200 : 400)) throw new Error(`${kind}: ${res.status}`);
    return performance.now() - t0;
  };
  // Warm both (JIT, pools, key cache).
  for (let i = 0; i < 200; i++) {
    await timed(bases.on, 'read');
    await timed(bases.off, 'read');
  }
  const results = { on: { read: [] as number[], refused: [] as number[] }, off: { read: [] as number[], refused: [] as number[] } };
  const run = async (kind: 'read' | 'refused', n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < n) {
          const i = next++;
          // One to one, the order alternating, so neither app always goes first.
          const order = i % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const);
          for (const which of order) results[which][kind].push(await timed(bases[which], kind));
        }
      }),
    );
  };
  await run('read', N_READ);
  await run('refused', N_REFUSED);
  await on.requestLog.flush();
  const written = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM api_requests')).rows[0]!.n;

  say(`# The request log's cost (${CLIENTS} concurrent clients, real HTTP, interleaved one to one)`);
  say(`machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}; node ${process.version}`);
  for (const kind of ['read', 'refused'] as const) {
    const label = kind === 'read' ? 'GET /v1/modules (200)' : 'POST /v1/analyze, unknown lens (400)';
    say(`${label}, log on:  ${fmt(results.on[kind])}`);
    say(`${label}, log off: ${fmt(results.off[kind])}`);
    say(`  difference (p50, on − off): ${(pct(results.on[kind], 50) - pct(results.off[kind], 50)).toFixed(2)} ms`);
  }
  say(`rows written by the log-on app: ${written} of ${200 + N_READ + N_REFUSED} requests it answered (the rest of the run: none by the log-off app)`);
  await mkdir(path.join(ROOT, 'bench/results'), { recursive: true });
  await writeFile(path.join(ROOT, 'bench/results/request-log.txt'), lines.join('\n') + '\n');
} finally {
  await on.close();
  await off.close();
  await db.end();
  await dropDatabase(config.DATABASE_URL);
  await rm(blobDir, { recursive: true, force: true });
}
