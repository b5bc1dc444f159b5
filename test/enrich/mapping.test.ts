import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXIFTOOL_CONFIG_PATH } from '../../enrich/exiftool.ts';
import {
  AI_NOTICE,
  AI_WRITER,
  confidentDate,
  ENRICH_FORMATS,
  GPS_METHOD,
  HISTORY_AGENT,
  iptcDate,
  lensDocument,
  lensProperty,
  MAX_KEYWORDS,
  planEnrichment,
  readExisting,
  type ExistingMetadata,
  type PlanInput,
} from '../../enrich/mapping.ts';
import { truncateUtf8, writableText } from '../../enrich/text.ts';
import { getLens, LENS_NAMES, type LensName } from '../../lenses/index.ts';
import type { LensRecord } from '../../registry/photos.ts';

const NOW = new Date('2026-03-04T05:06:07.000Z');
const SHA = 'a'.repeat(64);
const BARE: ExistingMetadata = {
  hasGps: false,
  hasCaptureDate: false,
  hasPlaceNames: false,
  keywords: { iptc: [], xmp: [] },
  personsInImage: [],
  iptcNeedsUtf8: false,
};

function record(lens: string, output: Record<string, unknown>, version = '1.0.0'): LensRecord {
  return { eventId: `evt_${lens}`, output, version, producedAt: '2026-02-01T00:00:00.000Z', coRunHash: 'h', provider: 'openai (simulated)' };
}
const fixture = (lens: LensName) => structuredClone(getLens(lens).fixture) as Record<string, unknown>;
const records = (...lenses: LensName[]) => Object.fromEntries(lenses.map((l) => [l, record(l, fixture(l))]));
const ALL = records('describe', 'accessibility', 'dating', 'location', 'people', 'entities', 'moderation');

const plan = (over: Partial<PlanInput> = {}) =>
  planEnrichment({ lenses: ALL, formats: ENRICH_FORMATS, container: 'jpeg', existing: BARE, sha256: SHA, now: NOW, ...over });

const FIXTURE_KEYWORDS = [
  'christmas', 'family', 'living room', 'presents', 'christmas tree', '1970s', 'snow', 'child', 'toy truck', 'holiday', 'instant film',
  'sofa', 'wrapped present', 'television', 'dog', 'Tonka', 'Pont Neuf', 'Statue of Henri IV',
];

describe('planEnrichment — the mapping table, on a file with no metadata of its own', () => {
  it('EXIF gets the caption and the confident coordinates, flagged as an AI estimate; never a date', () => {
    expect(plan().blocks.exif).toEqual({
      'EXIF:ImageDescription': fixture('describe').caption,
      'EXIF:GPSLatitude': 48.8571,
      'EXIF:GPSLatitudeRef': 'N',
      'EXIF:GPSLongitude': 2.3413,
      'EXIF:GPSLongitudeRef': 'E',
      'EXIF:GPSHPositioningError': 300,
      'EXIF:GPSProcessingMethod': GPS_METHOD,
    });
  });

  it('IPTC gets title, caption, keywords, the partial date with 00s, place names, the AI writer and UTF-8', () => {
    const d = fixture('describe');
    expect(plan().blocks.iptc).toEqual({
      'IPTC:ObjectName': d.title,
      'IPTC:Headline': d.title,
      'IPTC:Caption-Abstract': d.caption,
      'IPTC:Keywords': FIXTURE_KEYWORDS,
      'IPTC:DateCreated': '1978:00:00',
      'IPTC:City': 'Paris',
      'IPTC:Province-State': 'Île-de-France',
      'IPTC:Country-PrimaryLocationName': 'France',
      'IPTC:Writer-Editor': AI_WRITER,
      'IPTC:CodedCharacterSet': 'UTF8',
    });
  });

  it('XMP gets the standard fields, people, provenance and every record in the lenstack block', () => {
    const xmp = plan().blocks.xmp!;
    const d = fixture('describe');
    const a = fixture('accessibility');
    expect(xmp).toMatchObject({
      'XMP-dc:Title': d.title,
      'XMP-photoshop:Headline': d.title,
      'XMP-dc:Description': d.caption,
      'XMP-dc:Subject': FIXTURE_KEYWORDS,
      'XMP-iptcCore:AltTextAccessibility': a.altText,
      'XMP-iptcCore:ExtDescrAccessibility': a.longDescription,
      'XMP-photoshop:DateCreated': '1978',
      'XMP-photoshop:City': 'Paris',
      'XMP-photoshop:State': 'Île-de-France',
      'XMP-photoshop:Country': 'France',
      'XMP-iptcCore:CountryCode': 'FR',
      'XMP-exif:GPSLatitude': 48.8571,
      'XMP-exif:GPSLongitude': 2.3413,
      'XMP-exif:GPSHPositioningError': 300,
      'XMP-exif:GPSProcessingMethod': GPS_METHOD,
      'XMP-iptcExt:PersonInImage': ['Margaret Ellis'],
      'XMP-lenstack:Sha256': SHA,
      'XMP-lenstack:ProducedAt': NOW.toISOString(),
      'XMP-lenstack:AiGenerated': true,
      'XMP-lenstack:Notice': AI_NOTICE,
      'XMP-photoshop:CaptionWriter': AI_WRITER,
      'XMP-xmp:MetadataDate': NOW.toISOString(),
      'XMP-xmpMM:History+': [{ Action: 'edited', Changed: '/metadata', SoftwareAgent: HISTORY_AGENT, When: NOW.toISOString() }],
    });
    for (const lens of ['describe', 'accessibility', 'dating', 'location', 'people', 'entities']) {
      expect(JSON.parse(xmp[lensProperty(lens)!] as string)).toEqual({
        version: '1.0.0',
        producedAt: '2026-02-01T00:00:00.000Z',
        eventId: `evt_${lens}`,
        provider: 'openai (simulated)',
        output: fixture(lens as LensName),
      });
    }
    // Not DigitalSourceType (it describes the pixels, which are the camera's), not CreatorTool/Software.
    expect(Object.keys(xmp).filter((k) => /DigitalSourceType|CreatorTool|Software/.test(k))).toEqual([]);
  });

  it('moderation is never written, and lensVersions names exactly the records written', () => {
    const p = plan();
    expect(Object.keys(p.blocks.xmp!).some((k) => /moderation/i.test(k))).toBe(false);
    expect(lensProperty('moderation')).toBeUndefined();
    expect(p.lensVersions).toEqual({ accessibility: '1.0.0', dating: '1.0.0', describe: '1.0.0', entities: '1.0.0', location: '1.0.0', people: '1.0.0' });
    expect(p.formatsWritten).toEqual(['exif', 'iptc', 'xmp']);
  });
});

describe('planEnrichment — blocks, containers and what counts as written', () => {
  it('only the requested blocks are planned, in exif, iptc, xmp order', () => {
    expect(plan({ formats: ['xmp', 'exif'] }).formatsWritten).toEqual(['exif', 'xmp']);
    expect(Object.keys(plan({ formats: ['iptc'] }).blocks)).toEqual(['iptc']);
  });

  it('a container that cannot hold a block does not get it: WebP has no IPTC, GIF only XMP', () => {
    expect(plan({ container: 'webp' }).formatsWritten).toEqual(['exif', 'xmp']);
    expect(plan({ container: 'gif' }).formatsWritten).toEqual(['xmp']);
    expect(plan({ container: 'gif', formats: ['exif', 'iptc'] }).formatsWritten).toEqual([]);
  });

  it('exif alone from accessibility + people writes nothing (those map to XMP only) and names no lens', () => {
    const p = plan({ lenses: records('accessibility', 'people'), formats: ['exif', 'iptc'] });
    expect(p).toEqual({ blocks: {}, formatsWritten: [], lensVersions: {}, convertIptcToUtf8: false });
  });

  it('lensVersions carries each record version, and only lenses that reached a written block', () => {
    const lenses = { ...records('accessibility', 'dating'), describe: record('describe', fixture('describe'), '2.1.0') };
    expect(plan({ lenses, formats: ['exif'] }).lensVersions).toEqual({ describe: '2.1.0' });
    expect(plan({ lenses, formats: ['xmp'] }).lensVersions).toEqual({ accessibility: '1.0.0', dating: '1.0.0', describe: '2.1.0' });
  });

  it('unknown lens names are ignored rather than written under an undeclared property', () => {
    const p = plan({ lenses: { horoscope: record('horoscope', { sign: 'leo' }), ...records('describe') }, formats: ['xmp'] });
    expect(Object.keys(p.lensVersions)).toEqual(['describe']);
    expect(JSON.stringify(p.blocks)).not.toContain('leo');
  });
});

describe('planEnrichment — facts are never overwritten with a guess', () => {
  it('a file with its own GPS keeps it: no AI coordinates in any block; place names still go in', () => {
    const p = plan({ existing: { ...BARE, hasGps: true } });
    expect(Object.keys(p.blocks.exif ?? {}).filter((k) => k.includes('GPS'))).toEqual([]);
    expect(Object.keys(p.blocks.xmp!).filter((k) => k.includes('GPS'))).toEqual([]);
    expect(p.blocks.xmp!['XMP-photoshop:City']).toBe('Paris');
  });

  it('a file with a capture date gets no AI date in XMP or IPTC', () => {
    const p = plan({ existing: { ...BARE, hasCaptureDate: true } });
    expect(p.blocks.xmp!['XMP-photoshop:DateCreated']).toBeUndefined();
    expect(p.blocks.iptc!['IPTC:DateCreated']).toBeUndefined();
  });

  it('a file that names a place keeps its names', () => {
    const p = plan({ existing: { ...BARE, hasPlaceNames: true } });
    expect(Object.keys(p.blocks.xmp!).filter((k) => /City|State|Country/.test(k))).toEqual([]);
    expect(Object.keys(p.blocks.iptc!).filter((k) => /City|State|Country/.test(k))).toEqual([]);
  });

  it('coordinates below 0.7 confidence or vaguer than 25 km are not written', () => {
    const loc = fixture('location');
    const low = { ...loc, coordinates: { ...(loc.coordinates as object), confidence: 0.69 } };
    const vague = { ...loc, coordinates: { ...(loc.coordinates as object), uncertaintyKm: 26 } };
    for (const output of [low, vague]) {
      const p = plan({ lenses: { location: record('location', output) } });
      expect(Object.keys(p.blocks.exif ?? {})).toEqual([]);
      expect(p.blocks.xmp!['XMP-exif:GPSLatitude']).toBeUndefined();
    }
  });

  it('southern and western coordinates get S and W refs in EXIF and signed values in XMP', () => {
    const loc = { ...fixture('location'), coordinates: { latitude: -33.45, longitude: -70.66, uncertaintyKm: 5, confidence: 0.9 } };
    const p = plan({ lenses: { location: record('location', loc) } });
    expect(p.blocks.exif).toMatchObject({ 'EXIF:GPSLatitude': 33.45, 'EXIF:GPSLatitudeRef': 'S', 'EXIF:GPSLongitude': 70.66, 'EXIF:GPSLongitudeRef': 'W', 'EXIF:GPSHPositioningError': 5000 });
    expect(p.blocks.xmp).toMatchObject({ 'XMP-exif:GPSLatitude': -33.45, 'XMP-exif:GPSLongitude': -70.66 });
  });

  it('place names below 0.5 confidence are not written; a non-alpha-2 country code is dropped', () => {
    const loc = fixture('location');
    const low = plan({ lenses: { location: record('location', { ...loc, locationEstimate: { ...(loc.locationEstimate as object), confidence: 0.4 } }) } });
    expect(low.blocks.xmp!['XMP-photoshop:City']).toBeUndefined();
    const badCode = plan({ lenses: { location: record('location', { ...loc, locationEstimate: { ...(loc.locationEstimate as object), countryCode: 'FRA' } }) } });
    expect(badCode.blocks.xmp!['XMP-iptcCore:CountryCode']).toBeUndefined();
    expect(badCode.blocks.xmp!['XMP-photoshop:Country']).toBe('France');
  });
});

describe('confidentDate — only a confident date, at the precision the lens claims', () => {
  const ed = (date: string | null, precision: string, confidence = 0.9) => ({ date, precision, confidence, year: null, earliestYear: null, latestYear: null, reasoning: '' });
  it.each([
    [ed('1978', 'year'), '1978'],
    [ed('1978-05-12', 'year'), '1978'],
    [ed('1978-05-12', 'month'), '1978-05'],
    [ed('1978-05-12', 'day'), '1978-05-12'],
    [ed('2024-02-29', 'day'), '2024-02-29'],
  ])('%j → %s', (estimate, expected) => expect(confidentDate(estimate)).toBe(expected));

  it.each([
    ['below 0.7 confidence', ed('1978', 'year', 0.69)],
    ['decade precision', ed('1970', 'decade')],
    ['era precision', ed('1900', 'era')],
    ['a day claimed on a bare year', ed('1978', 'day')],
    ['no date', ed(null, 'year')],
    ['an impossible day', ed('1978-02-30', 'day')],
    ['a month 13', ed('1978-13', 'month')],
    ['free text', ed('circa 1978', 'year')],
  ])('%s → nothing', (_why, estimate) => expect(confidentDate(estimate)).toBeUndefined());

  it('IPTC DateCreated pads unknown month and day with 00', () => {
    expect([iptcDate('1978'), iptcDate('1978-05'), iptcDate('1978-05-12')]).toEqual(['1978:00:00', '1978:05:00', '1978:05:12']);
  });
});

describe('planEnrichment — lists, lengths and text', () => {
  it("keywords and people merge after the file's own, case-insensitively without duplicates", () => {
    const existing = { ...BARE, keywords: { iptc: ['Snow', 'Müller'], xmp: ['Blue Square'] }, personsInImage: ['Margaret Ellis', 'Tom'] };
    const p = plan({ existing });
    expect(p.blocks.iptc!['IPTC:Keywords']).toEqual(['Snow', 'Müller', ...FIXTURE_KEYWORDS.filter((k) => k !== 'snow')]);
    expect(p.blocks.xmp!['XMP-dc:Subject']).toEqual(['Blue Square', ...FIXTURE_KEYWORDS]);
    expect(p.blocks.xmp!['XMP-iptcExt:PersonInImage']).toEqual(['Margaret Ellis', 'Tom']);
  });

  it(`at most ${MAX_KEYWORDS} keywords of ours; low-confidence entities are left out`, () => {
    const tags = Array.from({ length: 60 }, (_, i) => `tag${i}`);
    const entities = { objects: [{ name: 'vase', confidence: 0.2 }], animals: [], brands: [] };
    const p = plan({ lenses: { describe: record('describe', { ...fixture('describe'), tags }), entities: record('entities', entities) } });
    expect(p.blocks.xmp!['XMP-dc:Subject']).toEqual(tags.slice(0, MAX_KEYWORDS));
  });

  it('IPTC values are cut to the IIM byte limits on a code point; XMP keeps the full text', () => {
    const title = 'É'.repeat(40); // 80 bytes in UTF-8
    const p = plan({ lenses: { describe: record('describe', { ...fixture('describe'), title, tags: ['ß'.repeat(40)] }) } });
    expect(p.blocks.iptc!['IPTC:ObjectName']).toBe('É'.repeat(32));
    expect(p.blocks.iptc!['IPTC:Keywords']).toEqual(['ß'.repeat(32)]);
    expect(p.blocks.xmp!['XMP-dc:Title']).toBe(title);
  });

  it('control characters become spaces; leading dashes, pipes and entities stay as they are', () => {
    const title = '\n-all=\n';
    const caption = '-o /tmp/x | &amp; &#10;\r\0end';
    const p = plan({ lenses: { describe: record('describe', { ...fixture('describe'), title, caption }) } });
    expect(p.blocks.xmp!['XMP-dc:Title']).toBe(' -all= ');
    expect(p.blocks.exif!['EXIF:ImageDescription']).toBe('-o /tmp/x | &amp; &#10;  end');
  });

  it('an empty caption falls back to the description paragraph', () => {
    const p = plan({ lenses: { describe: record('describe', { ...fixture('describe'), caption: '  ' }) } });
    expect(p.blocks.exif!['EXIF:ImageDescription']).toBe(fixture('describe').description);
  });

  it('records of an older shape never throw: wrong types are skipped, the record still goes into our block', () => {
    const odd = { title: 42, caption: ['x'], tags: 'not-a-list', extra: { nested: true } };
    const p = plan({ lenses: { describe: record('describe', odd, '0.9.0') } });
    expect(p.formatsWritten).toEqual(['xmp']);
    expect(JSON.parse(p.blocks.xmp!['XMP-lenstack:Describe'] as string).output).toEqual(odd);
    expect(p.lensVersions).toEqual({ describe: '0.9.0' });
  });
});

describe('readExisting — facts from a MetadataTool read', () => {
  it('finds GPS, capture dates, place names, lists and a non-UTF-8 IPTC record', () => {
    expect(
      readExisting({
        'GPS:GPSLatitude': 43.46,
        'ExifIFD:DateTimeOriginal': '2008:10:22 16:28:39',
        'IPTC:City': 'Nice',
        'IPTC:Keywords': 'solo',
        'XMP-dc:Subject': ['a', 1978],
        'XMP-iptcExt:PersonInImage': 'Ann',
        'IPTC:ApplicationRecordVersion': 4,
      }),
    ).toEqual({
      hasGps: true,
      hasCaptureDate: true,
      hasPlaceNames: true,
      keywords: { iptc: ['solo'], xmp: ['a', '1978'] },
      personsInImage: ['Ann'],
      iptcNeedsUtf8: true,
    });
  });

  it('an unset camera clock or a scan date is no capture date; IPTC declared UTF-8 needs no conversion', () => {
    const e = readExisting({ 'ExifIFD:DateTimeOriginal': '0000:00:00 00:00:00', 'ExifIFD:CreateDate': '2020:01:01 00:00:00', 'IPTC:CodedCharacterSet': '\u001b%G', 'IPTC:Keywords': ['x'] });
    expect(e.hasCaptureDate).toBe(false);
    expect(e.iptcNeedsUtf8).toBe(false);
    expect(readExisting({ 'IPTC:ApplicationRecordVersion': 4, 'IPTC:EnvelopeRecordVersion': 4 }).iptcNeedsUtf8).toBe(false);
  });

  it('the existing file decides the plan: convert IPTC only when IPTC is written', () => {
    const existing = { ...BARE, iptcNeedsUtf8: true };
    expect(plan({ existing }).convertIptcToUtf8).toBe(true);
    expect(plan({ existing, formats: ['xmp'] }).convertIptcToUtf8).toBe(false);
  });
});

describe('the lenstack namespace and text helpers', () => {
  it('the exiftool config declares a property for every lens but moderation, and nothing undeclared is planned', () => {
    const config = readFileSync(EXIFTOOL_CONFIG_PATH, 'utf8');
    for (const lens of LENS_NAMES.filter((l) => l !== 'moderation')) {
      const name = lensProperty(lens)!.replace('XMP-lenstack:', '');
      expect(config, lens).toMatch(new RegExp(`^\\s+${name}\\s+=> \\{ \\},`, 'm'));
    }
    for (const name of ['Sha256', 'ProducedAt', 'AiGenerated', 'Notice']) expect(config).toMatch(new RegExp(`^\\s+${name}\\s+=> \\{`, 'm'));
  });

  it('a lens document escapes what XMP cannot hold raw and parses back to the exact record', () => {
    const output = { text: 'a\u007fb\ufffec\uffffd\n\u0000e', emoji: '📷' };
    const doc = lensDocument(record('describe', output));
    expect(writableText(doc)).toBe(doc);
    expect(JSON.parse(doc).output).toEqual(output);
  });

  it('truncateUtf8 never splits a code point; writableText repairs lone surrogates', () => {
    expect(truncateUtf8('a📷b', 4)).toBe('a');
    expect(truncateUtf8('a📷b', 5)).toBe('a📷');
    expect(writableText('x\ud800y\udc00z')).toBe('x\ufffdy\ufffdz');
    expect(writableText('tab\there\u007f')).toBe('tab here ');
  });
});
