import { LRUCache } from 'lru-cache';
import type { VendorName } from '../core/config.ts';
import { decodeCheckedHashes } from '../images/intake.ts';
import type { PhotoHashes } from '../workflows/types.ts';
import { copyServes, makeWorkCopy, type WorkCopy } from './resize.ts';

/**
 * The worker's work copies, by the original's SHA-256, one copy per photo: the original is read
 * and decoded at the size the vendor asked for bills (the first vendor of the analysis), and every
 * vendor attempt (retries, fallbacks, one call per task) prepares its upload from the copy. A
 * vendor billing no more than the copy's size is served from it (its upload resized down); one
 * billing more (a fallback from OpenAI's 1024 px to Google's 1536, say) has the original read and
 * decoded again at its own size, and that copy replaces the smaller one (docs/decisions.md, "The
 * work copy's size"). Concurrent attempts on one image share the decode in flight, and one that
 * needs more than it gave then decodes again. Bounded by bytes (WORK_COPY_CACHE_BYTES, least
 * recently used out first); a failed decode is not kept, so it fails the same way for the next
 * caller, which the saga does not retry (IMAGE_INVALID).
 *
 * A photo new to the caller's registry also needs its perceptual hashes (intake no longer decodes
 * it: docs/decisions.md, "Decoding after the reservation"). `withHashes` makes them from the same
 * read of the original as the copy, both decodes asked at once; `copyThenHashes` answers with the
 * copy while the hashes are still being made, so the vendor call overlaps them (docs/decisions.md,
 * "Hashes while the vendor answers"); the hashes are kept by SHA-256
 * too (a few bytes each), so a retry or a fallback does not hash again, even one that decodes
 * the copy again.
 *
 * lru-cache (isaacs) rather than our own map: it brings the byte bound, the LRU order, the
 * single-flight `fetch` with the status of each lookup, and the refresh (`forceRefresh`, with the
 * vendor as the fetch's `context`) that replaces a copy by a larger one.
 */
export interface WorkCopies {
  /** A work copy that serves the vendor's upload (vendors/resize.ts `copyServes`). */
  get(sha256: string, vendor: VendorName): Promise<WorkCopy>;
  /** The work copy for the vendor and the photo's perceptual hashes, from one read of the original. */
  withHashes(sha256: string, vendor: VendorName): Promise<{ copy: WorkCopy; hashes: PhotoHashes }>;
  /**
   * `withHashes` that answers as soon as the copy is made, the hashes still under way (from the
   * same read): a vendor call is sent while they finish. Their promise never rejects unheard (a
   * caller that stops before awaiting it leaves no unhandled rejection); awaited, it rejects as
   * `hashes` does.
   */
  copyThenHashes(sha256: string, vendor: VendorName): Promise<{ copy: WorkCopy; hashes: Promise<PhotoHashes> }>;
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
  /**
   * Counted once per lookup: `decoded` read and decoded the original (first, or again for a vendor
   * billing more than the copy kept), `reused` was served by a copy made or in the making.
   */
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
  /** The context of a decode: the vendor whose billed size the copy is made at. */
  type Asked = { vendor: VendorName };
  const cache = new LRUCache<string, WorkCopy, Asked>({
    maxSize: opts.maxBytes,
    sizeCalculation: (copy) => Math.max(1, copy.pixels.length),
    // A refresh for a vendor billing more that fails (the blob store unreachable) keeps the smaller
    // copy for the vendors it serves; a first decode that fails keeps nothing, as before.
    noDeleteOnFetchRejection: true,
    fetchMethod: async (sha256, _smaller, { context }) => {
      opts.onLookup?.('decoded');
      const bytes = await opts.read(sha256);
      // Both decodes of the one read asked at once: a HEIC with no thumbnail fingerprints from the
      // very decode that makes its copy (the decode queue shares a decode of the same bytes in
      // flight), where asking after the copy would decode it whole twice. The copy does not wait
      // for the hashes: whoever asked for them joins that hashing (`hashOnce`).
      if (withHashesWanted.has(sha256)) hashOnce(sha256, async () => bytes).catch(() => {});
      return makeWorkCopy(bytes, context.vendor, opts.maxPixels);
    },
  });
  const get = async (sha256: string, vendor: VendorName, hashes: boolean): Promise<WorkCopy> => {
    if (hashes) withHashesWanted.set(sha256, (withHashesWanted.get(sha256) ?? 0) + 1);
    try {
      // A lookup starts at most one decode, and is counted `decoded` for it: on a miss, or as a
      // refresh when the copy kept or shared is too small for its vendor. A refresh replaces the
      // kept copy, and lookups arriving meanwhile share it (lru-cache hands them the fetch in
      // flight, whatever their vendor); one that finds it too small in turn refreshes again.
      let forceRefresh = false;
      let dispatched = false;
      for (;;) {
        const status: LRUCache.Status<string, WorkCopy, Asked> = {};
        let copy: WorkCopy | undefined;
        try {
          copy = await cache.fetch(sha256, { context: { vendor }, forceRefresh, status });
        } finally {
          if (status.fetch === 'miss' || status.fetch === 'refresh') dispatched = true;
        }
        if (!copy) throw new Error(`work copy of ${sha256} was not produced`);
        if (copyServes(copy, vendor)) {
          if (!dispatched) opts.onLookup?.('reused');
          return copy;
        }
        // Only a copy made for another vendor can be too small; one decoded for this one never is.
        if (dispatched) throw new Error(`work copy of ${sha256} was made smaller than ${vendor} bills`);
        forceRefresh = true;
      }
    } finally {
      if (hashes) {
        const left = withHashesWanted.get(sha256)! - 1;
        if (left) withHashesWanted.set(sha256, left);
        else withHashesWanted.delete(sha256);
      }
    }
  };
  const hashes = (sha256: string) => hashOnce(sha256, () => opts.read(sha256));
  const copyThenHashes = async (sha256: string, vendor: VendorName) => {
    const copy = await get(sha256, vendor, true);
    // The hashing this copy's read started, or, for a copy made before without them (or by a
    // call that did not ask), the hashes alone.
    const made = hashes(sha256);
    made.catch(() => {});
    return { copy, hashes: made };
  };
  return {
    get: (sha256, vendor) => get(sha256, vendor, false),
    async withHashes(sha256, vendor) {
      const { copy, hashes: made } = await copyThenHashes(sha256, vendor);
      return { copy, hashes: await made };
    },
    copyThenHashes,
    hashes,
  };
}
