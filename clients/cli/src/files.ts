import { createHash } from 'node:crypto';
import { open, readdir, readFile, realpath, stat, type FileHandle } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import { CliError, EXIT } from './exit-codes.ts';

/** A photo named on the command line: a URL the API fetches, or a file the CLI sends as base64. */
export type PhotoInput = { kind: 'url'; url: string; name: string } | { kind: 'file'; path: string; name: string };

const isUrl = (arg: string) => /^https?:\/\//i.test(arg);

export function photoInput(arg: string): PhotoInput {
  return isUrl(arg) ? { kind: 'url', url: arg, name: arg } : { kind: 'file', path: arg, name: basename(arg) };
}

export async function readPhoto(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`, EXIT.USAGE);
  }
}

/** The single-image part of an analyze or enrich body. */
export async function imageField(input: PhotoInput): Promise<{ imageUrl: string } | { imageBase64: string }> {
  return input.kind === 'url' ? { imageUrl: input.url } : { imageBase64: (await readPhoto(input.path)).toString('base64') };
}

/** The extensions of the formats the API takes (images/probe.ts ACCEPTED_FORMATS). */
export const PHOTO_EXTENSIONS = /\.(jpe?g|png|webp|gif|tiff?|heic|heif|avif|bmp)$/i;

/** Files read at once: enough to keep the disk busy, far below any descriptor limit. */
const READ_CONCURRENCY = 16;

export interface FoundPhoto {
  path: string;
  name: string;
  size: number;
  /** When the file last changed: a rerun trusts the hash it kept for the same size and time. */
  mtimeMs: number;
}

/**
 * The photos a batch takes from its arguments: files as given, folders walked (sub-folders too,
 * hidden entries skipped) for image extensions, in name order; each named by its path relative
 * to the folder it came from. A symlink to a file counts as that file (a symlinked folder is not
 * walked); a file reached twice (two links, or named twice) is taken once.
 */
export async function collectPhotos(args: string[]): Promise<FoundPhoto[]> {
  const candidates: Array<{ path: string; name: string }> = [];
  for (const arg of args) {
    let info;
    try {
      info = await stat(arg);
    } catch {
      throw new CliError(`cannot read ${arg}: no such file or folder`, EXIT.USAGE);
    }
    if (info.isFile()) {
      candidates.push({ path: arg, name: basename(arg) });
      continue;
    }
    const entries = (await readdir(arg, { recursive: true, withFileTypes: true }))
      .filter((e) => (e.isFile() || e.isSymbolicLink()) && PHOTO_EXTENSIONS.test(e.name))
      .map((e) => join(e.parentPath, e.name))
      .filter((p) => !relative(arg, p).split(/[\\/]/).some((part) => part.startsWith('.')))
      .sort();
    for (const path of entries) candidates.push({ path, name: relative(arg, path) });
  }
  // stat follows a link: a link to a folder or to nothing is left out like any non-photo.
  const found = await mapLimit(candidates, READ_CONCURRENCY, async (c) => {
    const info = await stat(c.path).catch(() => null);
    return info?.isFile() ? { ...c, size: info.size, mtimeMs: info.mtimeMs, real: await realpath(c.path) } : null;
  });
  const seen = new Set<string>();
  const out: FoundPhoto[] = [];
  for (const f of found) {
    if (!f || seen.has(f.real)) continue;
    seen.add(f.real);
    out.push({ path: f.path, name: f.name, size: f.size, mtimeMs: f.mtimeMs });
  }
  if (out.length === 0) throw new CliError(`no photos in ${args.join(', ')} (looked for ${PHOTO_EXTENSIONS.source})`, EXIT.USAGE);
  return out;
}

/** What a photo is read in, to hash it or to send it (upload-body.ts). */
export const READ_CHUNK = 256 * 1024;
/**
 * Read buffers of the reads that ended, for the next: at most as many as hashes and uploads run at
 * once (the batch command's HASH_CONCURRENCY and UPLOAD_CONCURRENCY, 4 each).
 */
const spareReadBuffers: Buffer[] = [];
const MAX_SPARE_READ_BUFFERS = 8;

/** A READ_CHUNK buffer, one a finished read gave back when there is one. */
export function takeReadBuffer(): Buffer {
  return spareReadBuffers.pop() ?? Buffer.allocUnsafeSlow(READ_CHUNK);
}

/** Gives a buffer back for the next read; only one nothing else still holds (a write cut short may). */
export function giveBackReadBuffer(buffer: Buffer): void {
  if (spareReadBuffers.length < MAX_SPARE_READ_BUFFERS) spareReadBuffers.push(buffer);
}

/**
 * The SHA-256 of a file, read in chunks into a buffer reused from file to file (a 50 MiB photo is
 * never whole in memory, and hashing 10,000 photos allocates no buffer per chunk: the garbage of a
 * fresh buffer per read, collected late and at best fragmenting the process' heap, made the CLI's
 * resident memory grow with the folder; docs/decisions.md, "The CLI's memory does not grow with
 * the fleet"). The batch command hashes before uploading, so the same bytes found twice in a
 * folder go up once.
 */
export async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  const buffer = takeReadBuffer();
  let file: FileHandle | undefined;
  try {
    file = await open(path, 'r');
    for (;;) {
      const { bytesRead } = await file.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
    }
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`, EXIT.USAGE);
  } finally {
    giveBackReadBuffer(buffer);
    await file?.close().catch(() => undefined);
  }
  return hash.digest('hex');
}

/** `fn` over `items` with at most `limit` running at once, results in order. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
