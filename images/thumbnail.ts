import type { Db } from '../db/pool.ts';
import type { BlobStore } from './blobstore.ts';
import { assertSha256 } from './blobstore.ts';
import { openImage } from './open.ts';

/** The longest side of a console thumbnail, in pixels. */
export const THUMBNAIL_PX = 256;

export interface Thumbnail {
  webp: Buffer;
  width: number;
  height: number;
}

/**
 * A photo's thumbnail: made once from its stored bytes (upright by its EXIF orientation, fitted
 * inside THUMBNAIL_PX, WebP) and kept in Postgres under the photo's SHA-256, so every later
 * request, on any console process, reads it back. Null when the photo's bytes are no longer kept.
 * Who may see it is the caller's business (web/routes/photos.ts checks the workspace holds it: batches/repository.ts).
 */
export async function thumbnailOf(deps: { db: Db; blobs: BlobStore }, sha256: string): Promise<Thumbnail | null> {
  assertSha256(sha256);
  const kept = await deps.db.query<Thumbnail>('SELECT webp, width, height FROM thumbnails WHERE sha256 = $1', [sha256]);
  if (kept.rows[0]) return kept.rows[0];
  if (!(await deps.blobs.has(sha256))) return null;
  const image = await openImage(await deps.blobs.get(sha256));
  const { data, info } = await image
    .rotate()
    .resize({ width: THUMBNAIL_PX, height: THUMBNAIL_PX, fit: 'inside', withoutEnlargement: true })
    .webp({ quality: 70 })
    .toBuffer({ resolveWithObject: true });
  // Two processes making the same one at once: the first row stays, both answers are the same picture.
  await deps.db.query('INSERT INTO thumbnails (sha256, webp, width, height) VALUES ($1, $2, $3, $4) ON CONFLICT (sha256) DO NOTHING', [sha256, data, info.width, info.height]);
  return { webp: data, width: info.width, height: info.height };
}
