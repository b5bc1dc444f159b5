import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Db } from '../../db/pool.ts';
import { hammingDistance } from '../../images/fingerprint.ts';
import { hashChunks, hexToSigned64 } from '../../registry/hashes.ts';
import { chunkNeighbourhood, chunkRadii, fuzzyStrategy, mihProbes, MIH_MAX_THRESHOLD, nearestByPHash } from '../../registry/lookup.ts';
import { rngFor } from '../../samples/random.ts';
import { createTestAccount } from '../helpers/app.ts';
import { testConfig } from '../harness/env.ts';

/**
 * The random hashes and bit flips below come from one seeded stream: a failure prints the seed,
 * and `MIH_SEED=<seed> npx vitest run test/registry/lookup-mih.test.ts` replays the exact same cases.
 */
const SEED = process.env.MIH_SEED ?? randomBytes(8).toString('hex');
console.log(`[mih] random property seed ${SEED} (replay with MIH_SEED=${SEED})`);
const rng = rngFor(`mih|${SEED}`);
/** `n` bytes from the seeded stream (what randomBytes(n) gave before, reproducibly). */
const seededBytes = (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => Math.floor(rng() * 256)));
const random64 = (): bigint => seededBytes(8).readBigUInt64BE();
const hex = (v: bigint) => v.toString(16).padStart(16, '0');

/** A mask flipping exactly perChunk[i] random bits inside chunk i (chunk 0 = most significant 16 bits). */
function profileMask(perChunk: number[]): bigint {
  let mask = 0n;
  perChunk.forEach((d, chunk) => {
    const bits = new Set<number>();
    while (bits.size < d) bits.add(seededBytes(1)[0]! & 15);
    for (const b of bits) mask |= 1n << BigInt((3 - chunk) * 16 + b);
  });
  return mask;
}

/** Every way to spread up to `max` flipped bits over 4 chunks (each ≤ 16). */
function profiles(max: number): number[][] {
  const out: number[][] = [];
  for (let a = 0; a <= Math.min(16, max); a++)
    for (let b = 0; a + b <= max && b <= 16; b++)
      for (let c = 0; a + b + c <= max && c <= 16; c++)
        for (let d = 0; a + b + c + d <= max && d <= 16; d++) out.push([a, b, c, d]);
  return out;
}

/** What the SQL probe does: a row is a candidate when some chunk column equals a probed value. */
function isCandidate(probes: number[][], h: string): boolean {
  return hashChunks(h).some((c, i) => probes[i]!.includes(c));
}

describe('MIH candidate generation', () => {
  it('a chunk neighbourhood holds every 16-bit value within the radius, once, and nothing else', () => {
    const binom = (n: number, k: number): number => (k === 0 ? 1 : (binom(n, k - 1) * (n - k + 1)) / k);
    for (let radius = -1; radius <= 4; radius++) {
      const v = seededBytes(2).readUInt16BE();
      const hood = chunkNeighbourhood(v, radius);
      let expected = 0;
      for (let k = 0; k <= radius; k++) expected += binom(16, k);
      expect(hood).toHaveLength(expected);
      expect(new Set(hood).size).toBe(hood.length);
      for (const x of hood) {
        expect(x).toBeGreaterThanOrEqual(0);
        expect(x).toBeLessThan(65536);
        expect(hammingDistance(x.toString(16).padStart(4, '0'), v.toString(16).padStart(4, '0'))).toBeLessThanOrEqual(radius);
      }
    }
  });

  it('chunk radii follow the tightened pigeonhole: 4s + a → a+1 chunks at s, the rest at s−1', () => {
    expect(chunkRadii(0)).toEqual([-1, -1, -1, 0]);
    expect(chunkRadii(3)).toEqual([0, 0, 0, 0]);
    expect(chunkRadii(5)).toEqual([0, 0, 1, 1]);
    expect(chunkRadii(10)).toEqual([1, 2, 2, 2]);
    expect(chunkRadii(12)).toEqual([2, 2, 2, 3]);
    // Probed values at threshold 5: 1 + 1 + 17 + 17 (plain pigeonhole would probe 4 × 17 = 68).
    expect(mihProbes('0123456789abcdef', 5).reduce((n, p) => n + p.length, 0)).toBe(36);
  });

  for (let r = 0; r <= 12; r++) {
    it(`threshold ${r}: the candidates hold every hash within ${r} (all per-chunk distance profiles), verified set = brute force`, () => {
      for (let trial = 0; trial < 3; trial++) {
        const q = random64();
        const qh = hex(q);
        const probes = mihProbes(qh, r);
        // Exhaustive over how the flipped bits fall into chunks (candidacy depends only on that),
        // up to r + 2 bits so hashes just outside the radius are in the pool too; plus random hashes.
        const pool = [...profiles(r + 2).map((p) => hex(q ^ profileMask(p))), ...Array.from({ length: 500 }, () => hex(random64()))];
        const brute = pool.filter((h) => hammingDistance(qh, h) <= r);
        const candidates = pool.filter((h) => isCandidate(probes, h));
        const verified = candidates.filter((h) => hammingDistance(qh, h) <= r);
        const missed = brute.filter((h) => !isCandidate(probes, h));
        expect(missed, `missed at r=${r}: ${missed.slice(0, 3).join(', ')}`).toEqual([]);
        expect(verified.sort()).toEqual(brute.sort());
        expect(brute.length).toBeGreaterThan(0);
        // And the filter filters: far-away random hashes are almost never candidates.
        expect(candidates.length).toBeLessThan(pool.length);
      }
    });
  }

  it('no probe set is looser than needed at the boundary: some profile at distance r + 1 escapes it', () => {
    for (let r = 0; r <= 12; r++) {
      const q = random64();
      const probes = mihProbes(hex(q), r);
      const escaped = profiles(r + 1)
        .filter((p) => p.reduce((a, b) => a + b, 0) === r + 1)
        .some((p) => !isCandidate(probes, hex(q ^ profileMask(p))));
      expect(escaped, `r=${r}`).toBe(true);
    }
  });

  it('thresholds up to 15 (every chunk radius ≤ 3) use MIH, larger ones the scan', () => {
    expect(MIH_MAX_THRESHOLD).toBe(15);
    expect([0, 5, 10, 15].map(fuzzyStrategy)).toEqual(['mih', 'mih', 'mih', 'mih']);
    expect([16, 19, 64].map(fuzzyStrategy)).toEqual(['scan', 'scan', 'scan']);
  });
});

describe('nearestByPHash in Postgres: MIH = scan = brute force', () => {
  let db: Db;
  beforeAll(() => {
    db = createPool(testConfig().DATABASE_URL, { max: 2 });
  });
  afterAll(async () => db?.end());

  async function insert(accountId: string, rows: Array<{ pHash: string; at: Date }>): Promise<string[]> {
    const shas = rows.map(() => randomBytes(32).toString('hex'));
    await db.query(
      `INSERT INTO photos (user_id, sha256, phash, dhash, phash_c0, phash_c1, phash_c2, phash_c3, first_analyzed_at, last_analyzed_at)
       SELECT $1, s, p, 0, c0, c1, c2, c3, t, t
         FROM unnest($2::text[], $3::bigint[], $4::int[], $5::int[], $6::int[], $7::int[], $8::timestamptz[]) AS u(s, p, c0, c1, c2, c3, t)`,
      [
        accountId,
        shas,
        rows.map((r) => hexToSigned64(r.pHash)),
        ...[0, 1, 2, 3].map((i) => rows.map((r) => hashChunks(r.pHash)[i])),
        rows.map((r) => r.at.toISOString()),
      ],
    );
    return shas;
  }

  it('for thresholds 0..16 and both strategies, the answer is the brute-force nearest (ties: most recently analyzed)', async () => {
    const user = await createTestAccount(db);
    const q = random64();
    const qh = hex(q);
    // Near hashes in every chunk profile up to 13 bits, each at a distinct time, plus random ones.
    const near = profiles(13).filter((_, i) => i % 7 === 0).map((p) => hex(q ^ profileMask(p)));
    const far = Array.from({ length: 300 }, () => hex(random64()));
    const all = [...near, ...far];
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    const rows = all.map((pHash, i) => ({ pHash, at: new Date(t0 + i * 60_000) }));
    const shas = await insert(user.userId, rows);
    for (let r = 0; r <= 16; r++) {
      const within = rows.map((row, i) => ({ ...row, sha: shas[i]!, d: hammingDistance(qh, row.pHash) })).filter((x) => x.d <= r);
      within.sort((a, b) => a.d - b.d || b.at.getTime() - a.at.getTime());
      const expected = within[0] ? { sha256: within[0].sha, distance: within[0].d } : null;
      for (const strategy of ['mih', 'scan'] as const) {
        expect(await nearestByPHash(db, { accountId: user.userId, pHash: qh, threshold: r, strategy }), `r=${r} ${strategy}`).toEqual(expected);
      }
    }
  });

  it('equal distance: the most recently analyzed photo wins; another user\'s closer photo is never seen', async () => {
    const [a, b] = [await createTestAccount(db), await createTestAccount(db)];
    const q = random64();
    const older = hex(q ^ profileMask([1, 0, 1, 0]));
    const newer = hex(q ^ profileMask([0, 2, 0, 0]));
    const [olderSha, newerSha] = await insert(a.userId, [
      { pHash: older, at: new Date('2026-03-01T00:00:00Z') },
      { pHash: newer, at: new Date('2026-03-02T00:00:00Z') },
    ]);
    await insert(b.userId, [{ pHash: hex(q), at: new Date('2026-03-03T00:00:00Z') }]);
    for (const strategy of ['mih', 'scan'] as const) {
      expect(await nearestByPHash(db, { accountId: a.userId, pHash: hex(q), threshold: 5, strategy })).toEqual({ sha256: newerSha, distance: 2 });
      await db.query('UPDATE photos SET last_analyzed_at = $3 WHERE user_id = $1 AND sha256 = $2', [a.userId, olderSha, new Date('2026-03-05T00:00:00Z')]);
      expect(await nearestByPHash(db, { accountId: a.userId, pHash: hex(q), threshold: 5, strategy })).toEqual({ sha256: olderSha, distance: 2 });
      await db.query('UPDATE photos SET last_analyzed_at = $3 WHERE user_id = $1 AND sha256 = $2', [a.userId, olderSha, new Date('2026-03-01T00:00:00Z')]);
    }
  });
});
