import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  closeSharedMetadataTool,
  createMetadataTool,
  IMAGE_DATA_HASH,
  MetadataFileError,
  sharedMetadataTool,
  type MetadataTool,
  type TagWrites,
} from '../../enrich/exiftool.ts';
import { ENRICH_FORMATS, planEnrichment, readExisting, WRITABLE_BLOCKS, type EnrichFormat } from '../../enrich/mapping.ts';
import type { ImageFormat } from '../../images/probe.ts';
import { getLens, type LensName } from '../../lenses/index.ts';
import { photoBytes } from '../helpers/photos.ts';
import { pixelHash, sha256Of } from './helpers.ts';

let tool: MetadataTool;
let dir: string;
beforeAll(async () => {
  tool = createMetadataTool({ maxProcs: 2 });
  dir = await mkdtemp(join(tmpdir(), 'lenstack-exiftool-test-'));
});
afterAll(async () => {
  await tool?.end();
  await closeSharedMetadataTool();
  if (dir) await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function fileOf(bytes: Buffer, ext: string): Promise<string> {
  const file = join(dir, `f${n++}.${ext}`);
  await writeFile(file, bytes);
  return file;
}

const fixture = (lens: LensName) => structuredClone(getLens(lens).fixture) as Record<string, unknown>;
const LENSES = Object.fromEntries(
  (['describe', 'accessibility', 'dating', 'location', 'people', 'entities'] as const).map((l) => [
    l,
    { eventId: `evt_${l}`, output: fixture(l), version: '1.0.0', producedAt: '2026-02-01T00:00:00.000Z', coRunHash: 'h', provider: 'p' },
  ]),
);

/** One real photo in every container exiftool writes (TIFF and HEIC are the shared camera files; BMP has no metadata blocks). */
async function containers(): Promise<Array<[ImageFormat, string, Buffer]>> {
  const base = sharp(photoBytes('orientation-landscape_1.jpg')).resize(160);
  return [
    ['jpeg', 'jpg', photoBytes('orientation-landscape_6.jpg')],
    ['tiff', 'tif', photoBytes('tiff-Arbitro.tiff')],
    ['png', 'png', await base.clone().png().toBuffer()],
    ['webp', 'webp', await base.clone().webp({ quality: 80 }).toBuffer()],
    ['avif', 'avif', await base.clone().avif({ quality: 50 }).toBuffer()],
    ['gif', 'gif', await base.clone().gif().toBuffer()],
    ['heif', 'heic', photoBytes('heic-IMG_5195.HEIC')],
  ];
}

/** A tag of each block that the plan always writes for the fixtures. */
const PROBE: Record<EnrichFormat, [write: string, read: string]> = {
  exif: ['EXIF:ImageDescription', 'IFD0:ImageDescription'],
  iptc: ['IPTC:ObjectName', 'IPTC:ObjectName'],
  xmp: ['XMP-dc:Title', 'XMP-dc:Title'],
};

describe('WRITABLE_BLOCKS matches what exiftool really writes, and never the pixels', () => {
  it('each container gets exactly its listed blocks; the pixels decode identically after the write', async () => {
    for (const [format, ext, bytes] of await containers()) {
      const file = await fileOf(bytes, ext);
      const before = await pixelHash(bytes);
      const plan = planEnrichment({ lenses: LENSES, formats: ENRICH_FORMATS, container: format, existing: readExisting(await tool.read(file)), sha256: sha256Of(bytes), now: new Date() });
      expect(plan.formatsWritten, format).toEqual(WRITABLE_BLOCKS[format]);
      await tool.write(file, Object.assign({}, ...Object.values(plan.blocks)));
      // The blocks the table leaves out: try them anyway, exiftool must store nothing.
      const missing = ENRICH_FORMATS.filter((f) => !WRITABLE_BLOCKS[format].includes(f));
      if (missing.length) await tool.write(file, Object.fromEntries(missing.map((f) => [PROBE[f][0], `probe-${f}`])));
      const after = await readFile(file);
      const tags = await tool.read(file);
      for (const f of ENRICH_FORMATS) {
        const expected = WRITABLE_BLOCKS[format].includes(f) ? (f === 'exif' ? fixture('describe').caption : fixture('describe').title) : undefined;
        expect(tags[PROBE[f][1]], `${format} ${f}`).toEqual(expected);
      }
      expect(tags['XMP-lenstack:Sha256'], format).toBe(sha256Of(bytes));
      expect(await pixelHash(after), `${format} pixels`).toBe(before);
      // The cheap runtime proof the service uses agrees: same image-data hash where exiftool has one.
      const dataHash = (await tool.read(await fileOf(bytes, ext)))[IMAGE_DATA_HASH];
      if (format !== 'gif') expect(dataHash, format).toMatch(/^[0-9a-f]{64}$/);
      expect(tags[IMAGE_DATA_HASH], format).toBe(dataHash);
      expect(after.equals(bytes), format).toBe(false);
    }
  });
});

describe('values are written literally and cannot become exiftool arguments', () => {
  const ATTACKS = [
    '-all=',
    '-o /tmp/lenstack-enrich-pwned.jpg',
    '| touch /tmp/lenstack-enrich-pwned',
    '-TagsFromFile',
    '@',
    '-execute',
    '&amp; &#10; &lt;x&gt; {a=b,c=[d]} "q" \'s\'',
    '$(id) `id` ; rm -rf /',
  ];

  it('each attack string round-trips unchanged through EXIF, IPTC, XMP and our namespace, with no side effect', async () => {
    const file = await fileOf(photoBytes('Canon_40D.jpg'), 'jpg');
    const beforeTags = await tool.read(file);
    for (const value of ATTACKS) {
      const tags: TagWrites = {
        'EXIF:ImageDescription': value,
        'IPTC:CodedCharacterSet': 'UTF8',
        'IPTC:Caption-Abstract': value,
        'IPTC:Keywords': [value, 'second'],
        'XMP-dc:Title': value,
        'XMP-dc:Subject': [value, 'second'],
        'XMP-lenstack:Describe': JSON.stringify({ title: value }),
      };
      await tool.write(file, tags);
      const t = await tool.read(file);
      expect(t['IFD0:ImageDescription'], value).toBe(value);
      expect(t['IPTC:Caption-Abstract'], value).toBe(value);
      expect(t['IPTC:Keywords'], value).toEqual([value, 'second']);
      expect(t['XMP-dc:Title'], value).toBe(value);
      expect(t['XMP-dc:Subject'], value).toEqual([value, 'second']);
      expect(JSON.parse(t['XMP-lenstack:Describe'] as string)).toEqual({ title: value });
      // The camera's EXIF is still all there: "-all=" deleted nothing.
      for (const k of ['IFD0:Make', 'IFD0:Model', 'ExifIFD:DateTimeOriginal', 'ExifIFD:ExposureTime']) expect(t[k], k).toEqual(beforeTags[k]);
    }
    expect(existsSync('/tmp/lenstack-enrich-pwned.jpg')).toBe(false);
    expect(existsSync('/tmp/lenstack-enrich-pwned')).toBe(false);
    expect((await readdir(dir)).filter((f) => !/^f\d+\.\w+$/.test(f))).toEqual([]);
  });

  it('CR, LF and NUL never reach exiftool: a newline-separated argument becomes spaces inside one value', async () => {
    const file = await fileOf(photoBytes('Nikon_D70.jpg'), 'jpg');
    await tool.write(file, { 'XMP-dc:Title': 'a\n-all=\n-XMP:all=\r\n-execute\u0000b', 'EXIF:ImageDescription': '\n-EXIF:all=\n' });
    const t = await tool.read(file);
    expect(t['XMP-dc:Title']).toBe('a -all= -XMP:all=  -execute b');
    expect(t['IFD0:ImageDescription']).toBe(' -EXIF:all= ');
    expect(t['IFD0:Make']).toBe('NIKON CORPORATION');
    expect(t['ExifIFD:DateTimeOriginal']).toBe('2008:03:15 09:52:01');
  });

  it('leading and trailing spaces are kept (exiftool drops spaces after "=" unless encoded)', async () => {
    const file = await fileOf(photoBytes('Nikon_D70.jpg'), 'jpg');
    await tool.write(file, { 'XMP-dc:Title': '   three', 'EXIF:ImageDescription': ' one ', 'IPTC:ObjectName': '  two  ' });
    const t = await tool.read(file);
    expect([t['XMP-dc:Title'], t['IFD0:ImageDescription'], t['IPTC:ObjectName']]).toEqual(['   three', ' one ', '  two  ']);
  });

  it('structure fields (xmpMM:History) refuse text that is not one of our constants', async () => {
    const file = await fileOf(photoBytes('Nikon_D70.jpg'), 'jpg');
    await expect(tool.write(file, { 'XMP-xmpMM:History+': [{ Action: 'edited', SoftwareAgent: 'x &amp; y' }] })).rejects.toThrow(/constants only/);
    await tool.write(file, { 'XMP-xmpMM:History+': [{ Action: 'edited', Changed: '/metadata', SoftwareAgent: 'Lenstack enrichment (AI-generated metadata)', When: '2026-03-04T05:06:07.000Z' }] });
    expect((await tool.read(file))['XMP-xmpMM:History']).toEqual([
      { Action: 'edited', Changed: '/metadata', SoftwareAgent: 'Lenstack enrichment (AI-generated metadata)', When: '2026:03:04 05:06:07.000Z' },
    ]);
  });

  it('a lens document far beyond one JPEG segment (extended XMP) round-trips exactly', async () => {
    const file = await fileOf(photoBytes('orientation-portrait_8.jpg'), 'jpg');
    const doc = JSON.stringify({ output: { text: 'ü'.repeat(150_000), list: Array.from({ length: 2000 }, (_, i) => `item ${i}`) } });
    await tool.write(file, { 'XMP-lenstack:Describe': doc });
    expect((await tool.read(file))['XMP-lenstack:Describe']).toBe(doc);
  });
});

describe('IPTC character set', () => {
  it('a Latin-1 IPTC record is re-encoded before it is declared UTF-8, so existing accents survive', async () => {
    // exiftool writes IPTC as Latin-1 while no CodedCharacterSet says otherwise.
    const latin = await fileOf(photoBytes('Pentax_K10D.jpg'), 'jpg');
    await tool.write(latin, { 'IPTC:Caption-Abstract': 'Café crème', 'IPTC:Keywords': ['Müller'] });
    expect(readExisting(await tool.read(latin)).iptcNeedsUtf8).toBe(true);

    const naive = await fileOf(await readFile(latin), 'jpg');
    await tool.write(naive, { 'IPTC:CodedCharacterSet': 'UTF8', 'IPTC:ObjectName': 'Île' });
    expect((await tool.read(naive))['IPTC:Caption-Abstract']).not.toBe('Café crème');

    await tool.convertIptcToUtf8(latin);
    await tool.write(latin, { 'IPTC:CodedCharacterSet': 'UTF8', 'IPTC:ObjectName': 'Île' });
    const t = await tool.read(latin);
    expect([t['IPTC:Caption-Abstract'], t['IPTC:Keywords'], t['IPTC:ObjectName']]).toEqual(['Café crème', 'Müller', 'Île']);
    expect(readExisting(t).iptcNeedsUtf8).toBe(false);
  });
});

describe('errors and lifecycle', () => {
  it("exiftool's verdict on a bad file is a MetadataFileError that does not leak our temp path", async () => {
    const file = await fileOf(Buffer.from('hello, not an image'), 'jpg');
    const err = await tool.write(file, { 'XMP-dc:Title': 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MetadataFileError);
    expect((err as Error).message).toMatch(/Not a valid JPG/);
    expect((err as Error).message).not.toContain(dir);
  });

  it('the shared tool is one per process until closed; after closing, the next use starts a fresh one', async () => {
    const a = sharedMetadataTool();
    expect(sharedMetadataTool()).toBe(a);
    const file = await fileOf(photoBytes('Canon_40D.jpg'), 'jpg');
    expect((await a.read(file))['IFD0:Make']).toBe('Canon');
    await closeSharedMetadataTool();
    const b = sharedMetadataTool();
    expect(b).not.toBe(a);
    expect((await b.read(file))['IFD0:Model']).toBe('Canon EOS 40D');
  });
});
