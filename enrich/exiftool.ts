import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { ExifTool, type WriteTags } from 'exiftool-vendored';
import { writableText } from './text.ts';

/**
 * Our one door to exiftool-vendored (every external library sits behind one small module of ours).
 * One ExifTool per process, started lazily, with Lenstack's XMP namespace declared through a
 * config file shipped beside this module. Values reach exiftool only through exiftool-vendored's
 * write API (one `-TAG=VALUE` argument per tag, HTML-entity encoded), never as raw arguments.
 */

/** Declares the `XMP-lenstack` group (prefix `lenstack`). */
export const EXIFTOOL_CONFIG_PATH = fileURLToPath(new URL('./lenstack.exiftool_config', import.meta.url));

/** One structure of an XMP struct list (e.g. an xmpMM:History event). */
export type TagStruct = Record<string, string>;
export type TagValue = string | number | boolean | string[] | TagStruct[];
/** Group-qualified tag name (`XMP-dc:Title`, `IPTC:Keywords`, `EXIF:ImageDescription`) → value. */
export type TagWrites = Record<string, TagValue>;
/** What a read returns: `Group1:Tag` → value (numbers unconverted, structures as objects). */
export type TagValues = Record<string, unknown>;

export interface MetadataTool {
  /**
   * Every tag of the file, keyed `Group1:Tag` (`-G1 -a`), values numeric (`-n`), structs as
   * objects, plus IMAGE_DATA_HASH where exiftool can compute it (JPEG, TIFF, PNG, WebP, AVIF).
   */
  read(file: string): Promise<TagValues>;
  /** Write tags into the file in place (no backup copy). Strings are written literally. */
  write(file: string, tags: TagWrites): Promise<void>;
  /**
   * Re-encode the file's existing IPTC as UTF-8 and mark it so (exiftool's documented recipe:
   * copy IPTC onto itself with CodedCharacterSet=UTF8). Without this, declaring UTF-8 on a
   * Latin-1 record would turn its existing accented values into mojibake.
   */
  convertIptcToUtf8(file: string): Promise<void>;
  end(): Promise<void>;
}

/** The file itself is unreadable or unwritable for exiftool (not an infrastructure fault). */
export class MetadataFileError extends Error {
  override name = 'MetadataFileError';
}

/** exiftool work is CPU-bound perl: half the cores, at least 1, at most 4. */
export const DEFAULT_MAX_PROCS = Math.min(4, Math.max(1, Math.ceil(availableParallelism() / 2)));

/** SHA-256 of the image data alone (no metadata): equal before and after = pixels untouched. */
export const IMAGE_DATA_HASH = 'File:ImageDataHash';

const READ_ARGS = ['-G1', '-a', '-n', '-struct', '-api', 'requesttags=imagedatahash', '-api', 'imagehashtype=SHA256'];
// No `_original` backup next to the file: the caller works on a private copy.
const WRITE_ARGS = ['-overwrite_original'];
const IPTC_TO_UTF8_ARGS = [...WRITE_ARGS, '-tagsFromFile', '@', '-IPTC:all', '--IPTC:CodedCharacterSet'];

/**
 * A string as exiftool will store it literally. exiftool-vendored runs exiftool with `-E` (HTML
 * entities are decoded on write) but leaves `&` unencoded, so a value containing `&amp;` or
 * `&#10;` would be decoded: escape `&` ourselves. exiftool also drops spaces right after the `=`
 * of an argument-file assignment, so leading spaces go in as entities. Control characters become
 * spaces here too (the mapping already did it; this is the guarantee none reaches exiftool).
 */
export function literal(s: string): string {
  return writableText(s)
    .replaceAll('&', '&amp;')
    .replace(/^ +/, (spaces) => '&#32;'.repeat(spaces.length));
}

// exiftool decodes entities in serialized structures a second time, so structure fields carry
// only our own constants and timestamps, never lens text.
const STRUCT_FIELD = /^[A-Za-z0-9 .:/()+_-]*$/;

function encode(tags: TagWrites): WriteTags {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(tags)) {
    if (typeof value === 'string') out[name] = literal(value);
    else if (Array.isArray(value)) {
      out[name] = (value as Array<string | TagStruct>).map((v) => {
        if (typeof v === 'string') return literal(v);
        for (const field of Object.values(v)) {
          if (!STRUCT_FIELD.test(field)) throw new Error(`${name}: structure fields hold constants only, got ${JSON.stringify(field)}`);
        }
        return v;
      });
    } else out[name] = value;
  }
  return out as WriteTags;
}

function fileError(err: unknown, file: string): Error {
  const message = err instanceof Error ? err.message : String(err);
  // exiftool's own verdicts on a file end with " - <path>"; timeouts and crashed processes do not.
  if (message.includes(file)) return new MetadataFileError(message.replaceAll(` - ${file}`, '').replaceAll(file, 'image').trim());
  return err instanceof Error ? err : new Error(message);
}

export function createMetadataTool(opts: { maxProcs?: number } = {}): MetadataTool {
  const et = new ExifTool({
    maxProcs: opts.maxProcs ?? DEFAULT_MAX_PROCS,
    // A timed-out write is not retried: a retry could append history entries twice.
    taskRetries: 0,
    // `-config` must come first on exiftool's command line.
    exiftoolArgs: ['-config', EXIFTOOL_CONFIG_PATH, '-stay_open', 'True', '-@', '-'],
  });
  return {
    async read(file) {
      try {
        const tags = (await et.readRaw(file, { readArgs: READ_ARGS, useMWG: false })) as Record<string, unknown>;
        delete tags.SourceFile;
        delete tags.errors;
        delete tags.warnings;
        return tags;
      } catch (err) {
        throw fileError(err, file);
      }
    },
    async write(file, tags) {
      try {
        await et.write(file, encode(tags), { writeArgs: WRITE_ARGS, useMWG: false });
      } catch (err) {
        throw fileError(err, file);
      }
    },
    async convertIptcToUtf8(file) {
      try {
        await et.write(file, { 'IPTC:CodedCharacterSet': 'UTF8' } as WriteTags, { writeArgs: IPTC_TO_UTF8_ARGS, useMWG: false });
      } catch (err) {
        throw fileError(err, file);
      }
    },
    end: () => et.end(),
  };
}

let shared: MetadataTool | undefined;

/** The process-wide tool, created on first use (exiftool processes start on the first task). */
export function sharedMetadataTool(): MetadataTool {
  shared ??= createMetadataTool();
  return shared;
}

/** Shutdown hook: ends the shared tool's exiftool processes; a later use starts a fresh one. */
export async function closeSharedMetadataTool(): Promise<void> {
  const tool = shared;
  shared = undefined;
  await tool?.end();
}
