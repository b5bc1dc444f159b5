import { LRUCache } from 'lru-cache';
import { makeWorkCopy, type WorkCopy } from './resize.ts';

/**
 * The worker's work copies, by the original's SHA-256: the original is read and decoded once, and
 * every vendor attempt of the analysis (retries, fallbacks, one call per task) prepares its upload
 * from the copy. Concurrent attempts on one image share the one decode in flight. Bounded by bytes
 * (WORK_COPY_CACHE_BYTES, least recently used out first); a failed decode is not kept, so it
 * fails the same way for the next caller, which the saga does not retry (IMAGE_INVALID).
 *
 * lru-cache (isaacs) rather than our own map: it brings the byte bound, the LRU order and the
 * single-flight `fetch` with the status of each lookup.
 */
export interface WorkCopies {
  get(sha256: string): Promise<WorkCopy>;
}

export function createWorkCopies(opts: {
  read: (sha256: string) => Promise<Buffer>;
  maxBytes: number;
  /** The configured IMAGE_MAX_PIXELS: the HEIC/BMP decoder holds every decode to it. */
  maxPixels: number;
  /** Counted per lookup: `decoded` read and decoded the original, `reused` shared a copy made or in the making. */
  onLookup?: (outcome: 'decoded' | 'reused') => void;
}): WorkCopies {
  const cache = new LRUCache<string, WorkCopy>({
    maxSize: opts.maxBytes,
    sizeCalculation: (copy) => Math.max(1, copy.pixels.length),
    fetchMethod: async (sha256) => {
      opts.onLookup?.('decoded');
      return makeWorkCopy(await opts.read(sha256), opts.maxPixels);
    },
  });
  return {
    async get(sha256) {
      const status: LRUCache.Status<string, WorkCopy> = {};
      const copy = await cache.fetch(sha256, { status });
      if (status.fetch !== 'miss') opts.onLookup?.('reused');
      if (!copy) throw new Error(`work copy of ${sha256} was not produced`);
      return copy;
    },
  };
}
