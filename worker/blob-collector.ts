import type { Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import type { WorkerMetrics } from '../metrics/worker.ts';
import { cancelNeverStarted } from '../batches/repository.ts';
import { dropExpiredLeases } from '../registry/blob-leases.ts';
import { deleteUnreferencedBlobs } from '../registry/photos.ts';
import { sweepRequestLog } from '../requestlog/repository.ts';

/** Blobs checked against the registry per query. */
const BATCH = 500;

/**
 * One collector pass: delete every stored image that nothing holds (registry/photos.ts
 * referencedPhotos: a live workspace's registry within its retention, an upload, a pending batch
 * photo, or a request's intake lease, registry/blob-leases.ts) and that was written more than
 * `graceMs` ago (longer than any analysis may run, so a blob an analysis in flight still reads is
 * never taken). A workspace's retention (users.retention_days) is enforced here: its photos stop
 * keeping their bytes that many days after it last sent them. The console's request log rows
 * older than 30 days go in the same pass. Returns how many blobs and bytes it deleted.
 */
export async function collectBlobs(
  db: Db,
  blobs: BlobStore,
  opts: { graceMs: number; metrics?: WorkerMetrics; log?: (msg: string) => void; now?: Date },
): Promise<{ deleted: number; bytes: number }> {
  const cutoff = (opts.now ?? new Date()).getTime() - opts.graceMs;
  // Leases whose holder died (registry/blob-leases.ts) hold nothing once expired; batches still
  // starting after the grace never will start (their API died): their photos stop being kept.
  await dropExpiredLeases(db);
  const neverStarted = await cancelNeverStarted(db, opts.graceMs);
  if (neverStarted) opts.log?.(`blob collector cancelled ${neverStarted} batch(es) whose workflow never started`);
  // The console's request log keeps 30 days (requestlog/repository.ts); the same pass sweeps it.
  const swept = await sweepRequestLog(db, opts.now);
  if (swept) opts.log?.(`blob collector swept ${swept} request log row(s) older than 30 days`);
  const out = { deleted: 0, bytes: 0 };
  let batch: Array<{ sha256: string; bytes: number }> = [];
  const flush = async () => {
    const sizes = new Map(batch.map((b) => [b.sha256, b.bytes]));
    for (const sha256 of await deleteUnreferencedBlobs(db, blobs, [...sizes.keys()])) {
      out.deleted += 1;
      out.bytes += sizes.get(sha256)!;
    }
    batch = [];
  };
  // The same walk removes writes begun past the grace and never named (their process died between
  // writing and naming).
  for await (const blob of blobs.list({ removeTemporaryBefore: new Date(cutoff) })) {
    if (blob.writtenAt.getTime() > cutoff) continue;
    batch.push({ sha256: blob.sha256, bytes: blob.bytes });
    if (batch.length >= BATCH) await flush();
  }
  if (batch.length) await flush();
  opts.metrics?.blobsCollected.inc(out.deleted);
  opts.metrics?.blobBytesCollected.inc(out.bytes);
  if (out.deleted) opts.log?.(`blob collector deleted ${out.deleted} unreferenced image(s), ${out.bytes} bytes`);
  return out;
}
