import { LRUCache } from 'lru-cache';
import { decodeCheckedHashes } from '../images/intake.ts';
import type { PhotoHashes } from '../workflows/types.ts';
import { makeWorkCopy, type WorkCopy } from './resize.ts';

/**
 * The worker's work copies, by the original's SHA-256: the original is read and decoded once, and
 * every vendor attempt of the analysis (retries, fallbacks, one call per task) prepares its upload
 * from the copy. Concurrent attempts on one image share the one decode in flight. Bounded by bytes
 * (WORK_COPY_CACHE_BYTES, least recently used out first); a failed decode is not kept, so it
 * fails the same way for the next caller, which the saga does not retry (IMAGE_INVALID).
 *
 * A photo new to the caller's registry also needs its perceptual hashes (intake no longer decodes
 * it: docs/decisions.md, "Decoding after the reservation"). `withHashes` makes them from the same
 * read of the original as the copy, both decodes running together; the hashes are kept by SHA-256
 * too (a few bytes each), so a retry or a fallback does not decode again.
 *
 * lru-cache (isaacs) rather than our own map: it brings the byte bound, the LRU order and the
 * single-flight `fetch` with the status of each lookup.
 */
export interface WorkCopies {
  get(sha256: string): Promise<WorkCopy>;
  /** The work copy and the photo's perceptual hashes, from one read of the original. */
  withHashes(sha256: string): Promise<{ copy: WorkCopy; hashes: PhotoHashes }>;
  /** The photo's perceptual hashes alone (read and decoded at reduced size when not kept). */
  hashes(sha256: string): Promise<PhotoHashes>;
}

/** Hashes kept: 64 bytes of text each, so 100,000 are a few megabytes. */
const HASHES_KEPT = 100_000;

export function createWorkCopies(opts: {
  read: (sha256: string) => Promise<Buffer>;
  maxBytes: number;
  /** The configured IMAGE_MAX_PIXELS: the HEIC/BMP decoder holds every decode to it. */
  maxPixels: number;
  /** The fingerprint's decode; by default intake's own (IMAGE_INVALID when the bytes do not decode). */
  hash?: (bytes: Buffer) => Promise<PhotoHashes>;
  /** Counted per lookup: `decoded` read and decoded the original, `reused` shared a copy made or in the making. */
  onLookup?: (outcome: 'decoded' | 'reused') => void;
}): WorkCopies {
  const hash = opts.hash ?? ((bytes: Buffer) => decodeCheckedHashes(bytes, opts.maxPixels));
  const kept = new LRUCache<string, PhotoHashes>({ max: HASHES_KEPT });
  const hashing = new Map<string, Promise<PhotoHashes>>();
  /** One hashing per photo in flight; kept once made, a failure not kept (it fails the same way again). */
  const hashOnce = (sha256: string, bytes: () => Promise<Buffer>): Promise<PhotoHashes> => {
    const known = kept.get(sha256);
    if (known) return Promise.resolve(known);
    let running = hashing.get(sha256);
    if (!running) {
      running = bytes()
        .then(hash)
        .then((h) => {
          const hashes = { pHash: h.pHash, dHash: h.dHash };
          kept.set(sha256, hashes);
          return hashes;
        })
        .finally(() => hashing.delete(sha256));
      hashing.set(sha256, running);
    }
    return running;
  };

  /** Photos whose copy is being asked for with their hashes: the copy's read serves both. */
  const withHashesWanted = new Map<string, number>();
  const cache = new LRUCache<string, WorkCopy>({
    maxSize: opts.maxBytes,
    sizeCalculation: (copy) => Math.max(1, copy.pixels.length),
    fetchMethod: async (sha256) => {
      opts.onLookup?.('decoded');
      const bytes = await opts.read(sha256);
      if (!withHashesWanted.has(sha256)) return makeWorkCopy(bytes, opts.maxPixels);
      // Both decodes of the one read at once (libvips runs each on its own threads).
      const [copy] = await Promise.all([makeWorkCopy(bytes, opts.maxPixels), hashOnce(sha256, async () => bytes)]);
      return copy;
    },
  });
  const get = async (sha256: string, hashes: boolean): Promise<WorkCopy> => {
    const status: LRUCache.Status<string, WorkCopy> = {};
    if (hashes) withHashesWanted.set(sha256, (withHashesWanted.get(sha256) ?? 0) + 1);
    let copy: WorkCopy | undefined;
    try {
      copy = await cache.fetch(sha256, { status });
    } finally {
      if (hashes) {
        const left = withHashesWanted.get(sha256)! - 1;
        if (left) withHashesWanted.set(sha256, left);
        else withHashesWanted.delete(sha256);
      }
    }
    if (status.fetch !== 'miss') opts.onLookup?.('reused');
    if (!copy) throw new Error(`work copy of ${sha256} was not produced`);
    return copy;
  };
  const hashes = (sha256: string) => hashOnce(sha256, () => opts.read(sha256));
  return {
    get: (sha256) => get(sha256, false),
    async withHashes(sha256) {
      const copy = await get(sha256, true);
      // A copy made before, without them (or by a call that did not ask): the hashes alone.
      return { copy, hashes: await hashes(sha256) };
    },
    hashes,
  };
}
