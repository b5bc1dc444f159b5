import type { Db } from '../db/pool.ts';
import { mapBounded } from '../core/map-bounded.ts';
import { hashChunks, hexToSigned64 } from './hashes.ts';
import { getPhotos, type PhotoRecord } from './photos.ts';

/**
 * Registry lookup (docs/contract.md "POST /v2/lookup and GET /v2/lookup"), always scoped to one account:
 * exact by SHA-256, fuzzy by pHash Hamming distance, with multi-index hashing (MIH) on the four
 * 16-bit pHash chunks so a fuzzy query touches a small slice of an account's photos, not all of them.
 */

export const THRESHOLD = { min: 0, max: 64, default: 5 } as const;

/**
 * Largest threshold answered by MIH; above it, a scan of the account's rows. Up to 15 every chunk
 * radius is ≤ 3 (≤ 2,788 probed values). bench/lookup.ts: on an account with 1M photos MIH is 4.5×
 * faster than the scan at 15, 3× at 16 and slower from 19 (radius 4 everywhere, 10,068 probes); on
 * an account with 10k photos the scan is a few ms either way and MIH costs at most ~3 ms more up to 15.
 */
export const MIH_MAX_THRESHOLD = 15;

const CHUNKS = 4;
const CHUNK_BITS = 16;
const CHUNK_COLUMNS = ['phash_c0', 'phash_c1', 'phash_c2', 'phash_c3'] as const;

/**
 * How far each chunk's probe reaches (-1 = chunk not probed) for an exact search within `threshold`.
 * Pigeonhole, tightened: write threshold = 4s + a (0 ≤ a < 4). If a+1 chunks all differ in more than
 * s bits and the other 3−a in more than s−1, the hash differs in at least (a+1)(s+1) + (3−a)s =
 * threshold + 1 bits. So some chunk of the first group is within s, or some of the rest within
 * s−1. The wider group is taken from the end: chunk 0 holds the DCT's DC bit (1 for every photo
 * that is not black), so its values are twice as crowded.
 */
export function chunkRadii(threshold: number): [number, number, number, number] {
  if (!Number.isInteger(threshold) || threshold < 0) throw new RangeError(`threshold must be a non-negative integer: ${threshold}`);
  const s = Math.floor(threshold / CHUNKS);
  const a = threshold % CHUNKS;
  return [0, 1, 2, 3].map((i) => (i >= CHUNKS - 1 - a ? s : s - 1)) as [number, number, number, number];
}

// MASKS_BY_WEIGHT[k]: every 16-bit mask with exactly k bits set.
const MASKS_BY_WEIGHT: number[][] = (() => {
  const byWeight: number[][] = Array.from({ length: CHUNK_BITS + 1 }, () => []);
  for (let m = 0; m < 1 << CHUNK_BITS; m++) {
    let w = 0;
    for (let x = m; x; x &= x - 1) w++;
    byWeight[w]!.push(m);
  }
  return byWeight;
})();

/** Every 16-bit value within `radius` bits of `value`, nearest first (empty for radius < 0). */
export function chunkNeighbourhood(value: number, radius: number): number[] {
  const out: number[] = [];
  for (let k = 0; k <= Math.min(radius, CHUNK_BITS); k++) for (const m of MASKS_BY_WEIGHT[k]!) out.push(value ^ m);
  return out;
}

export type ChunkProbes = [number[], number[], number[], number[]];

/**
 * The chunk values to probe, per chunk column: a photo whose pHash is within `threshold` of
 * `pHash` has at least one chunk equal to one of them (exact, never approximate).
 */
export function mihProbes(pHash: string, threshold: number): ChunkProbes {
  const chunks = hashChunks(pHash);
  const radii = chunkRadii(threshold);
  return chunks.map((c, i) => chunkNeighbourhood(c, radii[i]!)) as ChunkProbes;
}

export type FuzzyStrategy = 'mih' | 'scan';

export function fuzzyStrategy(threshold: number): FuzzyStrategy {
  return threshold <= MIH_MAX_THRESHOLD ? 'mih' : 'scan';
}

export interface NearestPhoto {
  sha256: string;
  distance: number;
}

/** The verified Hamming distance, computed in Postgres on the stored signed bigint. */
const DISTANCE_SQL = 'bit_count((phash # $2::bigint)::bit(64))';

/**
 * SQL and parameters of the fuzzy query; `strategy` defaults to the cut-over rule.
 *
 * MIH: one index-only scan per probed chunk on (user_id, phash_cN) INCLUDE (phash) keeps the
 * pHashes within the threshold without touching the heap; only those few rows are then read,
 * through the phash_c3 index, for the tie-break and the sha256. Scan: every row of the account.
 */
export function nearestQuery(args: { accountId: string; pHash: string; threshold: number; strategy?: FuzzyStrategy }): { text: string; values: unknown[] } {
  const strategy = args.strategy ?? fuzzyStrategy(args.threshold);
  const values: unknown[] = [args.accountId, hexToSigned64(args.pHash), args.threshold];
  // Best = smallest distance, then the most recently analyzed, then sha256 so ties are stable.
  const best = 'ORDER BY distance, last_analyzed_at DESC, sha256 LIMIT 1';
  if (strategy === 'scan') {
    return { text: `SELECT sha256, ${DISTANCE_SQL}::int AS distance FROM photos WHERE user_id = $1 AND ${DISTANCE_SQL} <= $3 ${best}`, values };
  }
  const branches: string[] = [];
  mihProbes(args.pHash, args.threshold).forEach((probes, i) => {
    if (!probes.length) return;
    values.push(probes);
    branches.push(`SELECT phash FROM photos WHERE user_id = $1 AND ${CHUNK_COLUMNS[i]} = ANY ($${values.length}::int[]) AND ${DISTANCE_SQL} <= $3`);
  });
  const text = `WITH near AS (${branches.join(' UNION ')})
  SELECT sha256, ${DISTANCE_SQL}::int AS distance
    FROM photos
   WHERE user_id = $1
     AND phash_c3 = ANY (ARRAY(SELECT (phash & 65535)::int FROM near))
     AND phash = ANY (ARRAY(SELECT phash FROM near))
   ${best}`;
  return { text, values };
}

/** The account's photo nearest to `pHash` within `threshold`, or null. */
export async function nearestByPHash(
  db: Pick<Db, 'query'>,
  args: { accountId: string; pHash: string; threshold: number; strategy?: FuzzyStrategy },
): Promise<NearestPhoto | null> {
  const q = nearestQuery(args);
  const r = await db.query<{ sha256: string; distance: number }>(q.text, q.values);
  return r.rows[0] ?? null;
}

export type LookupMatch =
  | { matchType: 'exact'; hammingDistance: number; photo: PhotoRecord }
  | { matchType: 'fuzzy'; hammingDistance: number; photo: PhotoRecord }
  | { matchType: 'none' };

/** One thing to look up: by SHA-256 (exact), by pHash (fuzzy), or both (an image: exact first). */
export interface LookupQuery {
  /** Key of the result in the response. */
  key: string;
  sha256?: string;
  pHash?: string;
}

const FUZZY_CONCURRENCY = 4;

/**
 * Looks every query up in one account's registry. A null account (the anonymous sandbox key) has no
 * registry: every result is `none`, and no query runs. Queries sharing a key share one result.
 */
export async function lookupFingerprints(
  db: Db,
  args: { accountId: string | null; queries: LookupQuery[]; threshold: number },
): Promise<Map<string, LookupMatch>> {
  const queries = [...new Map(args.queries.map((q) => [q.key, q])).values()];
  const results = new Map<string, LookupMatch>(queries.map((q) => [q.key, { matchType: 'none' }]));
  const { accountId } = args;
  if (accountId === null || !queries.length) return results;

  const exactShas = [...new Set(queries.flatMap((q) => (q.sha256 ? [q.sha256] : [])))];
  const exact = await getPhotos(db, accountId, exactShas);
  const nearest = new Map<string, NearestPhoto>();
  const fuzzyHashes = [...new Set(queries.filter((q) => !(q.sha256 && exact.has(q.sha256)) && q.pHash).map((q) => q.pHash!))];
  await mapBounded(fuzzyHashes, FUZZY_CONCURRENCY, async (pHash) => {
    const hit = await nearestByPHash(db, { accountId, pHash, threshold: args.threshold });
    if (hit) nearest.set(pHash, hit);
  });
  const fuzzy = await getPhotos(db, accountId, [...new Set([...nearest.values()].map((n) => n.sha256))]);

  for (const q of queries) {
    const same = q.sha256 ? exact.get(q.sha256) : undefined;
    // Same bytes means the same pHash: an exact match is also at distance 0.
    if (same) {
      results.set(q.key, { matchType: 'exact', hammingDistance: 0, photo: photoRecord(same) });
      continue;
    }
    const near = q.pHash ? nearest.get(q.pHash) : undefined;
    const photo = near ? fuzzy.get(near.sha256) : undefined;
    // A photo deleted between the two reads is simply no match.
    if (near && photo) results.set(q.key, { matchType: 'fuzzy', hammingDistance: near.distance, photo: photoRecord(photo) });
  }
  return results;
}

/** The contract's Photo record only (docs/contract.md "Resources"): internal companions (vendor, model) stay inside. */
function photoRecord(p: PhotoRecord): PhotoRecord {
  return {
    sha256: p.sha256,
    pHash: p.pHash,
    dHash: p.dHash,
    firstAnalyzedAt: p.firstAnalyzedAt,
    lastAnalyzedAt: p.lastAnalyzedAt,
    totalCreditsSpent: p.totalCreditsSpent,
    analyzeCallCount: p.analyzeCallCount,
    lenses: p.lenses,
  };
}
