import { readdir, readFile, stat } from 'node:fs/promises';
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

const PHOTO_EXTENSIONS = /\.(jpe?g|png|webp|gif|tiff?|heic|heif|avif|bmp)$/i;

/**
 * The photos a batch takes from its arguments: files as given, folders walked (sub-folders too,
 * hidden entries skipped) for image extensions, in name order; each named by its path relative
 * to the folder it came from.
 */
export async function collectPhotos(args: string[]): Promise<Array<{ path: string; name: string }>> {
  const out: Array<{ path: string; name: string }> = [];
  for (const arg of args) {
    let info;
    try {
      info = await stat(arg);
    } catch {
      throw new CliError(`cannot read ${arg}: no such file or folder`, EXIT.USAGE);
    }
    if (info.isFile()) {
      out.push({ path: arg, name: basename(arg) });
      continue;
    }
    const entries = (await readdir(arg, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile() && PHOTO_EXTENSIONS.test(e.name))
      .map((e) => join(e.parentPath, e.name))
      .filter((p) => !relative(arg, p).split(/[\\/]/).some((part) => part.startsWith('.')))
      .sort();
    for (const path of entries) out.push({ path, name: relative(arg, path) });
  }
  if (out.length === 0) throw new CliError(`no photos in ${args.join(', ')} (looked for ${PHOTO_EXTENSIONS.source})`, EXIT.USAGE);
  return out;
}
