import { readdir, readFile, realpath, stat } from 'node:fs/promises';
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

/**
 * The most one request to the API may carry: the default of its MAX_BODY_BYTES (core/config.ts).
 * A batch of files goes as one JSON body of base64, which is 4/3 of the photos' bytes.
 */
export const MAX_REQUEST_BYTES = 100 * 1024 * 1024;
/** Files read at once: enough to keep the disk busy, far below any descriptor limit. */
const READ_CONCURRENCY = 16;

export interface FoundPhoto {
  path: string;
  name: string;
  size: number;
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
    return info?.isFile() ? { ...c, size: info.size, real: await realpath(c.path) } : null;
  });
  const seen = new Set<string>();
  const out: FoundPhoto[] = [];
  for (const f of found) {
    if (!f || seen.has(f.real)) continue;
    seen.add(f.real);
    out.push({ path: f.path, name: f.name, size: f.size });
  }
  if (out.length === 0) throw new CliError(`no photos in ${args.join(', ')} (looked for ${PHOTO_EXTENSIONS.source})`, EXIT.USAGE);
  return out;
}

/** The size of the JSON body of a batch of these files: base64 of each, its name, the punctuation. */
export function batchBodyBytes(photos: FoundPhoto[]): number {
  return photos.reduce((n, p) => n + 4 * Math.ceil(p.size / 3) + Buffer.byteLength(JSON.stringify(p.name)) + 24, 256);
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/**
 * The batch items of these files, read a few at a time. Photos that cannot go in one request are
 * refused before a byte is read or sent: the API would answer 413 after the whole upload.
 */
export async function readBatchItems(photos: FoundPhoto[], limit = MAX_REQUEST_BYTES): Promise<Array<{ base64: string; name: string }>> {
  const body = batchBodyBytes(photos);
  if (body > limit) {
    const size = photos.reduce((n, p) => n + p.size, 0);
    throw new CliError(
      `${photos.length} photos, ${mib(size)} (${mib(body)} as base64), do not fit in one request: the API takes at most ${mib(limit)} per request. ` +
        'Upload large folders through the web console, whose resumable uploads take them whole, or run lenstack batch on parts of the folder.',
      EXIT.USAGE,
    );
  }
  return mapLimit(photos, READ_CONCURRENCY, async (p) => ({ base64: (await readPhoto(p.path)).toString('base64'), name: p.name }));
}

/** `fn` over `items` with at most `limit` running at once, results in order. */
async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
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
