import type { ImageFormat } from '../images/probe.ts';
import { LENS_NAMES, type LensName } from '../lenses/types.ts';
import type { LensOutput } from '../lenses/index.ts';
import type { LensRecord } from '../registry/photos.ts';
import type { TagStruct, TagValues, TagWrites } from './exiftool.ts';
import { truncateUtf8, writableText } from './text.ts';

/**
 * Pure: which tags POST /v2/enrich writes, per metadata block, from a photo's lens records and
 * what the file already carries. No I/O; enrich/service.ts reads and writes the file.
 *
 * Rules (docs/decisions.md "Enrichment mapping"):
 * - Descriptive text (title, caption, alt text) replaces what the file had: the caller asked for
 *   our lens output. Lists (keywords, people) are merged: the file's entries first, ours after.
 * - Facts are never overwritten with a guess: the AI date only when the file has no capture date,
 *   the AI coordinates only when it has no GPS, the AI place names only when it names no place.
 * - Guesses below a confidence floor are not written to standard fields (they stay in our block).
 * - The complete lens records go into our own XMP namespace (`XMP-lenstack`), one JSON per lens.
 */

export const ENRICH_FORMATS = ['exif', 'iptc', 'xmp'] as const;
export type EnrichFormat = (typeof ENRICH_FORMATS)[number];

/** Blocks exiftool writes into each container we accept (test/enrich proves each entry). */
export const WRITABLE_BLOCKS: Readonly<Record<ImageFormat, readonly EnrichFormat[]>> = {
  jpeg: ['exif', 'iptc', 'xmp'],
  tiff: ['exif', 'iptc', 'xmp'],
  png: ['exif', 'iptc', 'xmp'],
  webp: ['exif', 'xmp'],
  avif: ['exif', 'xmp'],
  heif: ['exif', 'xmp'],
  gif: ['xmp'],
  // exiftool cannot write BMP, which has no metadata blocks: enrich answers formatsWritten: [].
  bmp: [],
};

/** Labels (place names, people, object keywords) need at least this confidence. */
export const LABEL_MIN_CONFIDENCE = 0.5;
/** Values photo software treats as facts (capture date, GPS) need at least this. */
export const FACT_MIN_CONFIDENCE = 0.7;
/** A coordinate guess vaguer than this is no location at all. */
export const MAX_GPS_UNCERTAINTY_KM = 25;
export const MAX_KEYWORDS = 50;

/** Who wrote the caption (IPTC Writer-Editor ≤ 32 bytes, XMP photoshop:CaptionWriter). */
export const AI_WRITER = 'Lenstack AI (machine-generated)';
export const HISTORY_AGENT = 'Lenstack enrichment (AI-generated metadata)';
export const AI_NOTICE = 'Descriptive metadata written by Lenstack from AI lens output. The image pixels are unchanged.';
export const GPS_METHOD = 'Lenstack AI estimate';

/** IPTC IIM maximum lengths in bytes of the datasets we write. */
export const IPTC_MAX_BYTES = {
  ObjectName: 64,
  Headline: 256,
  'Caption-Abstract': 2000,
  Keywords: 64,
  City: 32,
  'Province-State': 32,
  'Country-PrimaryLocationName': 64,
} as const;

const pascal = (lens: string) => lens.split('-').map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('');

/** Every lens but moderation (an internal safety signal, never embedded in a shared file). */
const PROPERTY_OF: ReadonlyMap<string, string> = new Map(
  LENS_NAMES.filter((l) => l !== 'moderation').map((l) => [l, `XMP-lenstack:${pascal(l)}`]),
);

/** The XMP-lenstack property holding a lens's record, or undefined for lenses never written. */
export function lensProperty(lens: string): string | undefined {
  return PROPERTY_OF.get(lens);
}

export const isEnrichableLens = (lens: string): boolean => PROPERTY_OF.has(lens);

// ------------------------------------------------------------------ what the file already has

export interface ExistingMetadata {
  hasGps: boolean;
  /** A capture date (EXIF DateTimeOriginal, XMP/IPTC DateCreated); a scan's CreateDate is not one. */
  hasCaptureDate: boolean;
  /** Any city/state/country/country code in XMP or IPTC. */
  hasPlaceNames: boolean;
  keywords: { iptc: string[]; xmp: string[] };
  personsInImage: string[];
  /** The file has IPTC values not declared UTF-8: re-encode before declaring UTF-8. */
  iptcNeedsUtf8: boolean;
}

const UTF8_ESCAPE = '\u001b%G';
const IPTC_HOUSEKEEPING = new Set(['IPTC:CodedCharacterSet', 'IPTC:EnvelopeRecordVersion', 'IPTC:ApplicationRecordVersion']);

const present = (v: unknown) => v !== undefined && v !== null && String(v).trim() !== '';
const strings = (v: unknown): string[] => (v === undefined || v === null ? [] : (Array.isArray(v) ? v : [v]).map(String));
// Unset camera clocks write 0000:00:00 00:00:00.
const realDate = (v: unknown) => present(v) && /^[1-9]\d{3}/.test(String(v));

/** Facts about the original file, from MetadataTool.read (`-G1 -n` keys). */
export function readExisting(tags: TagValues): ExistingMetadata {
  const iptcKeys = Object.keys(tags).filter((k) => k.startsWith('IPTC:') && !IPTC_HOUSEKEEPING.has(k));
  return {
    hasGps: ['GPS:GPSLatitude', 'GPS:GPSLongitude', 'XMP-exif:GPSLatitude', 'XMP-exif:GPSLongitude'].some((k) => present(tags[k])),
    hasCaptureDate: ['ExifIFD:DateTimeOriginal', 'XMP-exif:DateTimeOriginal', 'XMP-photoshop:DateCreated', 'IPTC:DateCreated'].some((k) =>
      realDate(tags[k]),
    ),
    hasPlaceNames: [
      'XMP-photoshop:City',
      'XMP-photoshop:State',
      'XMP-photoshop:Country',
      'XMP-iptcCore:CountryCode',
      'IPTC:City',
      'IPTC:Province-State',
      'IPTC:Country-PrimaryLocationName',
    ].some((k) => present(tags[k])),
    keywords: { iptc: strings(tags['IPTC:Keywords']), xmp: strings(tags['XMP-dc:Subject']) },
    personsInImage: strings(tags['XMP-iptcExt:PersonInImage']),
    iptcNeedsUtf8: iptcKeys.length > 0 && tags['IPTC:CodedCharacterSet'] !== UTF8_ESCAPE,
  };
}

// ------------------------------------------------------------------ the plan

export interface EnrichmentPlan {
  /** Tags per block; only blocks that carry lens output are present. */
  blocks: Partial<Record<EnrichFormat, TagWrites>>;
  /** Keys of `blocks`, in exif, iptc, xmp order. */
  formatsWritten: EnrichFormat[];
  /** Lens → version of every record that contributed a written tag. */
  lensVersions: Record<string, string>;
  convertIptcToUtf8: boolean;
}

export interface PlanInput {
  /** The photo's latest lens records (moderation and unknown lenses are ignored). */
  lenses: Record<string, LensRecord>;
  formats: readonly EnrichFormat[];
  container: ImageFormat;
  existing: ExistingMetadata;
  /** SHA-256 of the original file. */
  sha256: string;
  now: Date;
}

type Obj = Record<string, unknown>;
/** A lens output as stored: the lens's shape, but any value may be missing or null. */
type Loose<T> = T extends readonly (infer U)[] ? ReadonlyArray<Loose<U>> : T extends object ? { readonly [K in keyof T]?: Loose<T[K]> | null } : T | null;
const obj = (v: unknown): Obj | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
/** Non-blank text, made writable (controls → spaces); never trimmed or otherwise altered. */
const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? writableText(v) : undefined);
const atLeast = (v: unknown, min: number) => (num(v) ?? -1) >= min;

/** Case-insensitive union, first spelling wins, order kept. */
function mergeUnique(...lists: string[][]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const s of lists.flat()) {
    const key = s.toLocaleLowerCase('en');
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(s);
  }
  return out;
}

const iptc = (s: string, field: keyof typeof IPTC_MAX_BYTES) => truncateUtf8(s, IPTC_MAX_BYTES[field]);

const PRECISION_LENGTH: Record<string, number> = { year: 4, month: 7, day: 10 };

/** A confident ISO date at its stated precision (YYYY, YYYY-MM or YYYY-MM-DD), else undefined. */
export function confidentDate(estimatedDate: unknown): string | undefined {
  const ed = obj(estimatedDate);
  const date = typeof ed?.date === 'string' ? ed.date : undefined;
  const length = PRECISION_LENGTH[String(ed?.precision)];
  if (!date || !length || !atLeast(ed?.confidence, FACT_MIN_CONFIDENCE)) return undefined;
  const m = /^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$/.exec(date);
  if (!m || date.length < length) return undefined;
  const [y, mo, d] = [Number(m[1]), Number(m[2] ?? 1), Number(m[3] ?? 1)];
  const check = new Date(Date.UTC(y, mo - 1, d));
  if (y < 1000 || check.getUTCFullYear() !== y || check.getUTCMonth() !== mo - 1 || check.getUTCDate() !== d) return undefined;
  return date.slice(0, length);
}

/** IPTC DateCreated (CCYY:MM:DD) of a partial ISO date: unknown month/day are 00 (IIM rule). */
export const iptcDate = (iso: string) => `${iso.slice(0, 4)}:${iso.slice(5, 7) || '00'}:${iso.slice(8, 10) || '00'}`;

/** The JSON document of one lens in our XMP block: the complete record minus internal hashes. */
export function lensDocument(record: LensRecord): string {
  const json = JSON.stringify({
    version: record.version,
    producedAt: record.producedAt,
    eventId: record.eventId,
    provider: record.provider,
    output: record.output,
  });
  // JSON.stringify escapes C0 controls but not DEL or U+FFFE/U+FFFF, which XMP cannot hold raw.
  return json.replace(/[\u007f\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function planEnrichment(input: PlanInput): EnrichmentPlan {
  const { existing } = input;
  const selected = new Set(input.formats.filter((f) => WRITABLE_BLOCKS[input.container].includes(f)));
  const records = Object.entries(input.lenses)
    .filter(([lens]) => isEnrichableLens(lens))
    .sort(([a], [b]) => a.localeCompare(b));
  const byLens = new Map(records);
  // Typed from each lens's own output schema, so a renamed field breaks this file's compilation;
  // read defensively all the same (Loose), since a stored record may predate the lens version.
  const out = <N extends LensName>(lens: N): Loose<LensOutput<N>> | undefined => obj(byLens.get(lens)?.output) as Loose<LensOutput<N>> | undefined;

  const blocks: Partial<Record<EnrichFormat, TagWrites>> = {};
  const contributors = new Set<string>();
  const put = (block: EnrichFormat, lens: string | string[], tag: string, value: TagWrites[string]) => {
    if (!selected.has(block)) return;
    (blocks[block] ??= {})[tag] = value;
    for (const l of Array.isArray(lens) ? lens : [lens]) contributors.add(l);
  };

  // describe: title and caption (the one-sentence caption is the MWG "Description" in all three
  // blocks; the paragraph stays in our block).
  const describe = out('describe');
  const title = text(describe?.title);
  if (title) {
    put('xmp', 'describe', 'XMP-dc:Title', title);
    put('xmp', 'describe', 'XMP-photoshop:Headline', title);
    put('iptc', 'describe', 'IPTC:ObjectName', iptc(title, 'ObjectName'));
    put('iptc', 'describe', 'IPTC:Headline', iptc(title, 'Headline'));
  }
  const caption = text(describe?.caption) ?? text(describe?.description);
  if (caption) {
    put('exif', 'describe', 'EXIF:ImageDescription', caption);
    put('xmp', 'describe', 'XMP-dc:Description', caption);
    put('iptc', 'describe', 'IPTC:Caption-Abstract', iptc(caption, 'Caption-Abstract'));
  }

  // Keywords: describe tags first, then confident entities and landmarks.
  const candidates: Array<{ word: string; lens: string }> = [];
  /** Words from a lens's list; labelled items count only when confident. */
  const addWords = <T,>(lens: LensName, items: ReadonlyArray<T | null> | null | undefined, word: (item: T) => unknown, confidence?: (item: T) => unknown) => {
    // An older record may hold anything where the lens now has a list.
    for (const item of Array.isArray(items) ? (items as ReadonlyArray<T | null>) : []) {
      if (item === null || typeof item === 'undefined') continue;
      const w = text(word(item));
      if (w && (!confidence || atLeast(confidence(item), LABEL_MIN_CONFIDENCE))) candidates.push({ word: w, lens });
    }
  };
  addWords('describe', describe?.tags, (tag) => tag);
  const entities = out('entities');
  addWords('entities', entities?.objects, (o) => o?.name, (o) => o?.confidence);
  addWords('entities', entities?.animals, (a) => a?.commonName, (a) => a?.confidence);
  addWords('entities', entities?.brands, (b) => b?.name, (b) => b?.confidence);
  const location = out('location');
  addWords('location', location?.landmarks, (l) => l?.name, (l) => l?.confidence);
  const words = mergeUnique(candidates.map((c) => c.word)).slice(0, MAX_KEYWORDS);
  if (words.length) {
    const chosen = new Set(words);
    const lenses = [...new Set(candidates.filter((c) => chosen.has(c.word)).map((c) => c.lens))];
    put('xmp', lenses, 'XMP-dc:Subject', mergeUnique(existing.keywords.xmp, words));
    put('iptc', lenses, 'IPTC:Keywords', mergeUnique(existing.keywords.iptc, words.map((w) => iptc(w, 'Keywords'))));
  }

  // accessibility: the IPTC 2021 accessibility properties exist only in XMP.
  const accessibility = out('accessibility');
  const altText = text(accessibility?.altText);
  if (altText) put('xmp', 'accessibility', 'XMP-iptcCore:AltTextAccessibility', altText);
  const longDescription = text(accessibility?.longDescription);
  if (longDescription) put('xmp', 'accessibility', 'XMP-iptcCore:ExtDescrAccessibility', longDescription);

  // dating: a confident AI date, only for a file without a capture date; never into EXIF.
  const date = existing.hasCaptureDate ? undefined : confidentDate(out('dating')?.estimatedDate);
  if (date) {
    put('xmp', 'dating', 'XMP-photoshop:DateCreated', date);
    put('iptc', 'dating', 'IPTC:DateCreated', iptcDate(date));
  }

  // location: place names unless the file names a place; coordinates unless it has GPS.
  const estimate = location?.locationEstimate;
  if (estimate && !existing.hasPlaceNames && atLeast(estimate.confidence, LABEL_MIN_CONFIDENCE)) {
    const city = text(estimate.city);
    const region = text(estimate.region);
    const country = text(estimate.country);
    const code = typeof estimate.countryCode === 'string' && /^[A-Z]{2}$/.test(estimate.countryCode) ? estimate.countryCode : undefined;
    if (city) {
      put('xmp', 'location', 'XMP-photoshop:City', city);
      put('iptc', 'location', 'IPTC:City', iptc(city, 'City'));
    }
    if (region) {
      put('xmp', 'location', 'XMP-photoshop:State', region);
      put('iptc', 'location', 'IPTC:Province-State', iptc(region, 'Province-State'));
    }
    if (country) {
      put('xmp', 'location', 'XMP-photoshop:Country', country);
      put('iptc', 'location', 'IPTC:Country-PrimaryLocationName', iptc(country, 'Country-PrimaryLocationName'));
    }
    // IIM wants an alpha-3 code; the lens gives alpha-2, which only XMP accepts.
    if (code) put('xmp', 'location', 'XMP-iptcCore:CountryCode', code);
  }
  const coords = location?.coordinates;
  const lat = num(coords?.latitude);
  const lon = num(coords?.longitude);
  const uncertaintyKm = num(coords?.uncertaintyKm);
  if (
    !existing.hasGps && lat !== undefined && lon !== undefined && uncertaintyKm !== undefined &&
    Math.abs(lat) <= 90 && Math.abs(lon) <= 180 && uncertaintyKm >= 0 && uncertaintyKm <= MAX_GPS_UNCERTAINTY_KM &&
    atLeast(coords?.confidence, FACT_MIN_CONFIDENCE)
  ) {
    const errorMetres = Math.max(1, Math.round(uncertaintyKm * 1000));
    put('exif', 'location', 'EXIF:GPSLatitude', Math.abs(lat));
    put('exif', 'location', 'EXIF:GPSLatitudeRef', lat < 0 ? 'S' : 'N');
    put('exif', 'location', 'EXIF:GPSLongitude', Math.abs(lon));
    put('exif', 'location', 'EXIF:GPSLongitudeRef', lon < 0 ? 'W' : 'E');
    put('exif', 'location', 'EXIF:GPSHPositioningError', errorMetres);
    put('exif', 'location', 'EXIF:GPSProcessingMethod', GPS_METHOD);
    put('xmp', 'location', 'XMP-exif:GPSLatitude', lat);
    put('xmp', 'location', 'XMP-exif:GPSLongitude', lon);
    put('xmp', 'location', 'XMP-exif:GPSHPositioningError', errorMetres);
    put('xmp', 'location', 'XMP-exif:GPSProcessingMethod', GPS_METHOD);
  }

  // people: caller-supplied names the lens matched with evidence.
  const names: string[] = [];
  const matches = out('people')?.knownPeopleMatches;
  for (const m of Array.isArray(matches) ? matches : []) {
    const name = text(m?.name);
    if (name && atLeast(m?.confidence, LABEL_MIN_CONFIDENCE)) names.push(name);
  }
  if (names.length) put('xmp', 'people', 'XMP-iptcExt:PersonInImage', mergeUnique(existing.personsInImage, names));

  // Our own block: every record, complete.
  if (records.length && selected.has('xmp')) {
    const nowIso = input.now.toISOString();
    put('xmp', [], 'XMP-lenstack:Sha256', input.sha256);
    put('xmp', [], 'XMP-lenstack:ProducedAt', nowIso);
    put('xmp', [], 'XMP-lenstack:AiGenerated', true);
    put('xmp', [], 'XMP-lenstack:Notice', AI_NOTICE);
    for (const [lens, record] of records) put('xmp', lens, lensProperty(lens)!, lensDocument(record));
  }

  // Provenance, only in blocks that carry lens output.
  if (blocks.iptc) {
    blocks.iptc['IPTC:Writer-Editor'] = AI_WRITER;
    blocks.iptc['IPTC:CodedCharacterSet'] = 'UTF8';
  }
  if (blocks.xmp) {
    const when = input.now.toISOString();
    blocks.xmp['XMP-photoshop:CaptionWriter'] = AI_WRITER;
    blocks.xmp['XMP-xmp:MetadataDate'] = when;
    const event: TagStruct = { Action: 'edited', Changed: '/metadata', SoftwareAgent: HISTORY_AGENT, When: when };
    blocks.xmp['XMP-xmpMM:History+'] = [event];
  }

  const formatsWritten = ENRICH_FORMATS.filter((f) => blocks[f] !== undefined);
  const lensVersions = Object.fromEntries(records.filter(([lens]) => contributors.has(lens)).map(([lens, r]) => [lens, r.version]));
  return { blocks, formatsWritten, lensVersions, convertIptcToUtf8: formatsWritten.includes('iptc') && existing.iptcNeedsUtf8 };
}
