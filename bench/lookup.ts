/**
 * Fuzzy lookup on one account with 1,000,000 photos: multi-index hashing (MIH) at thresholds 5 and 10
 * against a sequential bit_count scan of the same rows for the same query hashes, interleaved in
 * one run; then a sweep over thresholds that places the MIH → scan cut-over.
 * Run: npx tsx bench/lookup.ts   Writes bench/results/lookup.txt.
 *
 * Works in its own scratch database (lenstack_bench_lookup) on the configured Postgres server,
 * migrated with db/migrate.ts, dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { loadConfig } from '../core/config.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool, type Db } from '../db/pool.ts';
import { hashChunks, hexToSigned64 } from '../registry/hashes.ts';
import { chunkRadii, mihProbes, MIH_MAX_THRESHOLD, nearestByPHash, nearestQuery, type FuzzyStrategy } from '../registry/lookup.ts';

const DB_NAME = 'lenstack_bench_lookup';
const PHOTOS = 1_000_000;
const BATCH = 20_000;
const QUERIES = 250;
const WARMUP = 20;
/** Near-duplicates inserted around every query hash, at these distances. */
const NEAR_DISTANCES = [3, 8, 13];
const SWEEP = [3, 7, 11, 12, 13, 14, 15, 16, 17, 18, 19];
const SWEEP_QUERIES = 30;
const ACCOUNT = 'usr_bench_lookup';
/** A second, ordinary account: where MIH's fixed cost per probe, not the rows, decides the cut-over. */
const SMALL_ACCOUNT = 'usr_bench_lookup_small';
const SMALL_PHOTOS = 10_000;

const random64 = (): bigint => randomBytes(8).readBigUInt64BE();
const hex64 = (v: bigint) => v.toString(16).padStart(16, '0');

/** `v` with `d` distinct random bits flipped. */
function flip(v: bigint, d: number): bigint {
  const bits = new Set<number>();
  while (bits.size < d) bits.add(randomBytes(1)[0]! & 63);
  let out = v;
  for (const b of bits) out ^= 1n << BigInt(b);
  return out;
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
function stats(times: number[]) {
  const s = [...times].sort((a, b) => a - b);
  return { p50: quantile(s, 0.5), p99: quantile(s, 0.99), min: s[0]!, n: s.length };
}

/**
 * Bulk load: batched multi-row inserts through unnest (one statement per 20k rows). The secondary
 * indexes are dropped first and rebuilt afterwards from their own definitions (as migrated), which
 * is several times faster than maintaining them row by row.
 */
async function load(db: Db, queryHashes: bigint[], log: (s: string) => void): Promise<{ hashes: BigUint64Array }> {
  const secondary = await db.query<{ name: string; def: string }>(
    `SELECT i.indexname AS name, i.indexdef AS def FROM pg_indexes i
      WHERE i.tablename = 'photos' AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
  );
  for (const ix of secondary.rows) await db.query(`DROP INDEX ${pg.escapeIdentifier(ix.name)}`);
  const near = queryHashes.flatMap((q) => NEAR_DISTANCES.map((d) => flip(q, d)));
  const hashes = new BigUint64Array(PHOTOS);
  for (let i = 0; i < PHOTOS; i++) hashes[i] = i < near.length ? near[i]! : random64();
  await insertPhotos(db, ACCOUNT, hashes, log);
  await insertPhotos(db, SMALL_ACCOUNT, BigUint64Array.from({ length: SMALL_PHOTOS }, random64), () => {});
  for (const ix of secondary.rows) await db.query(ix.def);
  log(`  rebuilt ${secondary.rows.map((ix) => ix.name).join(', ')}`);
  return { hashes };
}

async function insertPhotos(db: Db, accountId: string, hashes: BigUint64Array, log: (s: string) => void): Promise<void> {
  const total = hashes.length;
  // Inserted in sha256 order so the primary key grows at its right edge instead of splitting pages
  // at random; heap order stays unrelated to the pHash, as in production (insertion order).
  const shas = Array.from({ length: total }, () => randomBytes(32).toString('hex')).sort();
  const yearMs = 365 * 24 * 3600 * 1000;
  const now = Date.now();
  for (let start = 0; start < total; start += BATCH) {
    const n = Math.min(BATCH, total - start);
    const sha: string[] = [];
    const ph: string[] = [];
    const dh: string[] = [];
    const c: number[][] = [[], [], [], []];
    const at: string[] = [];
    for (let i = 0; i < n; i++) {
      const h = hex64(hashes[start + i]!);
      sha.push(shas[start + i]!);
      ph.push(hexToSigned64(h));
      dh.push(hexToSigned64(hex64(random64())));
      hashChunks(h).forEach((v, k) => c[k]!.push(v));
      at.push(new Date(now - Math.floor(Math.random() * yearMs)).toISOString());
    }
    await db.query(
      `INSERT INTO photos (user_id, sha256, phash, dhash, phash_c0, phash_c1, phash_c2, phash_c3, first_analyzed_at, last_analyzed_at, analyze_call_count)
       SELECT $1, s, p, d, c0, c1, c2, c3, t, t, 1
         FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::int[], $6::int[], $7::int[], $8::int[], $9::timestamptz[]) AS u(s, p, d, c0, c1, c2, c3, t)`,
      [accountId, sha, ph, dh, c[0], c[1], c[2], c[3], at],
    );
    if ((start / BATCH) % 10 === 9) log(`  loaded ${start + n}`);
  }
}

/** Smallest distance to `q` over every stored hash, in JS: the ground truth for each answer. */
function bruteMin(hashes: BigUint64Array, q: bigint, limit: number): number | null {
  const qHi = Number(q >> 32n);
  const qLo = Number(q & 0xffffffffn);
  const words = new Uint32Array(hashes.buffer);
  let best = limit + 1;
  for (let i = 0; i < hashes.length; i++) {
    // Little-endian BigUint64Array: low word first.
    let x = (words[2 * i]! ^ qLo) >>> 0;
    let y = (words[2 * i + 1]! ^ qHi) >>> 0;
    let d = 0;
    for (; x; x &= x - 1) d++;
    for (; y; y &= y - 1) d++;
    if (d < best) best = d;
  }
  return best <= limit ? best : null;
}

async function main(): Promise<void> {
  const serverUrl = loadConfig().DATABASE_URL;
  const url = new URL(serverUrl);
  url.pathname = `/${DB_NAME}`;
  const log = (s: string) => process.stdout.write(`${s}\n`);
  await dropDatabase(url.toString()); // a stale one from an interrupted run
  await createDatabaseIfMissing(url.toString());
  const db = createPool(url.toString(), { max: 2, application: 'bench-lookup' });
  try {
    await migrate(url.toString());
    await db.query(`INSERT INTO users (id, email) VALUES ($1, 'bench@example.test'), ($2, 'bench-small@example.test')`, [ACCOUNT, SMALL_ACCOUNT]);
    const queryHashes = Array.from({ length: QUERIES }, random64);
    let t0 = performance.now();
    const { hashes } = await load(db, queryHashes, log);
    const loadS = (performance.now() - t0) / 1000;
    t0 = performance.now();
    await db.query('VACUUM ANALYZE photos');
    const analyzeS = (performance.now() - t0) / 1000;
    const size = await db.query<{ table: string; indexes: string }>(
      `SELECT pg_size_pretty(pg_table_size('photos')) AS table, pg_size_pretty(pg_indexes_size('photos')) AS indexes`,
    );
    log(`loaded ${PHOTOS} photos in ${loadS.toFixed(1)} s, VACUUM ANALYZE ${analyzeS.toFixed(1)} s; ${JSON.stringify(size.rows[0])}`);

    const run = (pHash: string, threshold: number, strategy: FuzzyStrategy, accountId = ACCOUNT) => nearestByPHash(db, { accountId, pHash, threshold, strategy });
    const timed = async (pHash: string, threshold: number, strategy: FuzzyStrategy, accountId = ACCOUNT) => {
      const t = performance.now();
      const hit = await run(pHash, threshold, strategy, accountId);
      return { ms: performance.now() - t, hit };
    };

    // Warm-up, uncounted: the same caches a serving database would have hot.
    for (let i = 0; i < WARMUP; i++) {
      const h = hex64(random64());
      await run(h, 5, 'mih');
      await run(h, 10, 'mih');
      if (i < 3) await run(h, 5, 'scan');
    }

    type Name = 'mih@5' | 'mih@10' | 'scan@5';
    const contenders: Array<{ name: Name; threshold: number; strategy: FuzzyStrategy }> = [
      { name: 'mih@5', threshold: 5, strategy: 'mih' },
      { name: 'mih@10', threshold: 10, strategy: 'mih' },
      { name: 'scan@5', threshold: 5, strategy: 'scan' },
    ];
    const times = new Map<Name, number[]>(contenders.map((c) => [c.name, []]));
    const found = new Map<Name, number>(contenders.map((c) => [c.name, 0]));
    let mismatches = 0;
    for (let i = 0; i < QUERIES; i++) {
      const q = queryHashes[i]!;
      const h = hex64(q);
      const answers = new Map<Name, { sha256: string; distance: number } | null>();
      for (let k = 0; k < contenders.length; k++) {
        const c = contenders[(i + k) % contenders.length]!;
        const { ms, hit } = await timed(h, c.threshold, c.strategy);
        times.get(c.name)!.push(ms);
        answers.set(c.name, hit);
        if (hit) found.set(c.name, found.get(c.name)! + 1);
      }
      // Every answer is checked: MIH must find exactly what the scan and a JS brute force find.
      const truth5 = bruteMin(hashes, q, 5);
      const truth10 = bruteMin(hashes, q, 10);
      if ((answers.get('mih@5')?.distance ?? null) !== truth5) mismatches++;
      if ((answers.get('scan@5')?.distance ?? null) !== truth5) mismatches++;
      if ((answers.get('mih@10')?.distance ?? null) !== truth10) mismatches++;
      if (answers.get('mih@5')?.sha256 !== answers.get('scan@5')?.sha256) mismatches++;
    }
    const s = new Map(contenders.map((c) => [c.name, stats(times.get(c.name)!)]));
    log(`main run done: ${[...s].map(([name, x]) => `${name} p50 ${x.p50.toFixed(2)} p99 ${x.p99.toFixed(2)}`).join(', ')}; ${mismatches} mismatches`);

    // Cut-over sweep: same interleaving, fewer queries, thresholds around each MIH probe level,
    // on the 1M-photo account and on an ordinary 10k-photo one.
    type Side = { mih: ReturnType<typeof stats>; scan: ReturnType<typeof stats> };
    const sweep: Array<{ threshold: number; probes: number; candidates: number; big: Side; small: Side }> = [];
    for (const threshold of SWEEP) {
      const side = async (accountId: string): Promise<Side> => {
        const mih: number[] = [];
        const scan: number[] = [];
        for (let i = 0; i < SWEEP_QUERIES; i++) {
          const h = hex64(queryHashes[i]!);
          const order: FuzzyStrategy[] = i % 2 ? ['mih', 'scan'] : ['scan', 'mih'];
          const got: Array<number | null> = [];
          for (const strategy of order) {
            const { ms, hit } = await timed(h, threshold, strategy, accountId);
            (strategy === 'mih' ? mih : scan).push(ms);
            got.push(hit?.distance ?? null);
          }
          if (got[0] !== got[1]) mismatches++;
        }
        return { mih: stats(mih), scan: stats(scan) };
      };
      let candidates = 0;
      for (let i = 0; i < 5; i++) {
        const r = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM photos WHERE user_id = $1 AND (phash_c0 = ANY($2) OR phash_c1 = ANY($3) OR phash_c2 = ANY($4) OR phash_c3 = ANY($5))`,
          [ACCOUNT, ...mihProbes(hex64(queryHashes[i]!), threshold)],
        );
        candidates += r.rows[0]!.n / 5;
      }
      const probes = mihProbes(hex64(queryHashes[0]!), threshold).reduce((n, p) => n + p.length, 0);
      sweep.push({ threshold, probes, candidates, big: await side(ACCOUNT), small: await side(SMALL_ACCOUNT) });
      log(`sweep ${threshold} done`);
    }

    const explain = async (threshold: number, strategy: FuzzyStrategy) => {
      const q = nearestQuery({ accountId: ACCOUNT, pHash: hex64(queryHashes[0]!), threshold, strategy });
      const r = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${q.text}`, q.values);
      return r.rows.map((row) => `    ${row['QUERY PLAN']}`).join('\n');
    };
    const plans = [
      `  MIH, threshold 5:\n${await explain(5, 'mih')}`,
      `  MIH, threshold 10:\n${await explain(10, 'mih')}`,
      `  scan, threshold 5:\n${await explain(5, 'scan')}`,
    ];
    const settings = await db.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', 'max_parallel_workers_per_gather', 'jit', 'random_page_cost') ORDER BY name`,
    );
    const version = await db.query<{ server_version: string }>('SHOW server_version');

    const f = (x: number) => x.toFixed(2).padStart(8);
    const scan50 = s.get('scan@5')!.p50;
    const lines = [
      `fuzzy lookup benchmark — ${new Date().toISOString()}`,
      `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'} (shared), ${Math.round(os.totalmem() / 2 ** 30)} GiB, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`,
      `postgres ${version.rows[0]!.server_version}: ${settings.rows.map((r) => `${r.name}=${r.setting}`).join(', ')}; node ${process.version}, pg over localhost TCP`,
      `data: ${PHOTOS.toLocaleString('en')} photos of one user (and ${SMALL_PHOTOS.toLocaleString('en')} of a second), random 64-bit pHashes, plus near-duplicates of each of the ${QUERIES} query hashes at distances ${NEAR_DISTANCES.join(', ')}; table ${size.rows[0]!.table}, indexes ${size.rows[0]!.indexes}`,
      `load: ${loadS.toFixed(1)} s (batched unnest inserts of ${BATCH.toLocaleString('en')} rows, secondary indexes rebuilt after), VACUUM ANALYZE ${analyzeS.toFixed(1)} s`,
      `timing: wall clock of nearestByPHash() (one round trip, plan + execute) after ${WARMUP} warm-up queries; ${QUERIES} query hashes, contenders interleaved and rotated per query`,
      '',
      `${'contender'.padEnd(10)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'min ms'.padStart(8)} ${'found'.padStart(6)}  probes`,
      ...contenders.map((c) => {
        const x = s.get(c.name)!;
        const probes = c.strategy === 'mih' ? `${chunkRadii(c.threshold).join('/')} bits per chunk, ${mihProbes(hex64(queryHashes[0]!), c.threshold).reduce((n, p) => n + p.length, 0)} chunk values` : 'every row';
        return `${c.name.padEnd(10)} ${f(x.p50)} ${f(x.p99)} ${f(x.min)} ${String(found.get(c.name)).padStart(6)}  ${probes}`;
      }),
      '',
      `speedup scan p50 / MIH p50: threshold 5 = ${(scan50 / s.get('mih@5')!.p50).toFixed(1)}×, threshold 10 = ${(scan50 / s.get('mih@10')!.p50).toFixed(1)}×  (target: p50 ≤ 3 ms and ≥ 20× at 5)`,
      `speedup scan p99 / MIH p99: threshold 5 = ${(s.get('scan@5')!.p99 / s.get('mih@5')!.p99).toFixed(1)}×, threshold 10 = ${(s.get('scan@5')!.p99 / s.get('mih@10')!.p99).toFixed(1)}×`,
      `answers checked against the scan and a JS brute force over all ${PHOTOS.toLocaleString('en')} hashes: ${mismatches} mismatches`,
      '',
      `cut-over sweep (${SWEEP_QUERIES} queries per threshold and user, MIH and scan alternating); MIH_MAX_THRESHOLD = ${MIH_MAX_THRESHOLD}`,
      `${''.padEnd(26)} | ${`user with ${PHOTOS.toLocaleString('en')} photos`.padEnd(53)} | user with ${SMALL_PHOTOS.toLocaleString('en')} photos`,
      `${'threshold'.padEnd(9)} ${'radii'.padStart(8)} ${'probes'.padStart(7)} | ${'rows read'.padStart(9)} ${'MIH p50'.padStart(8)} ${'MIH p99'.padStart(8)} ${'scan p50'.padStart(8)} ${'scan/MIH'.padStart(9)} | ${'MIH p50'.padStart(8)} ${'scan p50'.padStart(8)} ${'scan/MIH'.padStart(9)}`,
      ...sweep.map(
        (w) =>
          `${String(w.threshold).padEnd(9)} ${chunkRadii(w.threshold).join('/').padStart(8)} ${String(w.probes).padStart(7)} | ${String(Math.round(w.candidates)).padStart(9)} ${f(w.big.mih.p50)} ${f(w.big.mih.p99)} ${f(w.big.scan.p50)} ${(w.big.scan.p50 / w.big.mih.p50).toFixed(1).padStart(8)}× | ${f(w.small.mih.p50)} ${f(w.small.scan.p50)} ${(w.small.scan.p50 / w.small.mih.p50).toFixed(1).padStart(8)}×`,
      ),
      '',
      'plans (EXPLAIN ANALYZE, first query hash):',
      ...plans,
    ];
    const report = `${lines.join('\n')}\n`;
    process.stdout.write(report);
    const out = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results', 'lookup.txt');
    await mkdir(path.dirname(out), { recursive: true });
    await writeFile(out, report);
  } finally {
    await db.end();
    await dropDatabase(url.toString());
  }
}

await main();
