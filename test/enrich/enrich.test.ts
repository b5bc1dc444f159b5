import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { closeSharedMetadataTool, createMetadataTool, MetadataFileError, type MetadataTool } from '../../enrich/exiftool.ts';
import { AI_WRITER, confidentDate, ENRICH_FORMATS, GPS_METHOD, iptcDate, lensProperty, type EnrichFormat } from '../../enrich/mapping.ts';
import { ENRICH_CREDITS } from '../../credits/price-book.ts';
import { SANDBOX_LENSES } from '../../enrich/service.ts';
import { writableText } from '../../enrich/text.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { getLens, type LensName } from '../../lenses/index.ts';
import { getPhotos, type LensRecord } from '../../registry/photos.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp } from '../helpers/app.ts';
import { photoBase64, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { bmpOf } from '../images/foreign-inputs.ts';
import { type Canary, type PublicServer, startCanaryAndPublic } from '../images/servers.ts';
import { keysOf, ledgerOf, pixelHash, readBack, seedRegistry, sha256Of } from './helpers.ts';

let p: Pipeline;
let tool: MetadataTool;
let canary: Canary;
let server: PublicServer;
const SERVED = photoBytes('orientation-portrait_8.jpg');

beforeAll(async () => {
  ({ canary, server } = await startCanaryAndPublic(SERVED));
  // 127.0.0.2 plays a public host; every other address keeps the production policy.
  p = await startPipeline({ fetchPolicy: { allowAddress: (ip) => ip === '127.0.0.2' || isPublicAddress(ip), timeoutMs: 3000 } });
  tool = createMetadataTool({ maxProcs: 1 });
}, 120_000);
afterAll(async () => {
  await p?.close();
  await tool?.end();
  await closeSharedMetadataTool();
  await server?.close();
  await canary?.close();
});

const enrich = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}, app = p.app) =>
  app.inject({ method: 'POST', url: '/v2/enrich', headers: { ...bearer(key), ...headers }, payload: body });

const fixture = (lens: LensName) => structuredClone(getLens(lens).fixture) as Record<string, unknown>;
const fixtures = (...lenses: LensName[]) => Object.fromEntries(lenses.map((l) => [l, fixture(l)]));
/** exiftool lists a one-item list as a plain value. */
const list = (v: unknown): string[] => (v === undefined ? [] : [v].flat().map(String));
/** exiftool -n prints XMP dates with colons, and a bare year as a number. */
const xmpDate = (iso: string) => (/^\d{4}$/.test(iso) ? Number(iso) : iso.replaceAll('-', ':'));
const enrichRows = async (accountId: string) => (await ledgerOf(p.db, accountId)).filter((r) => r.reservation_id?.startsWith('enrich:'));

describe('POST /v2/enrich — a real analysis written back into the photo', () => {
  it('analyze a photo, then exif, iptc, xmp alone and all three: every block carries exactly the registry values, pixels untouched, 5 credits each', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const original = photoBytes('orientation-landscape_6.jpg');
    const sha = sha256Of(original);
    const modules = ['describe', 'accessibility', 'dating', 'location', 'entities', 'people'];
    const analysis = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageBase64: original.toString('base64'), modules } });
    expect(analysis.statusCode, analysis.body).toBe(200);
    expect(analysis.json().usage.creditsCharged).toBe(6);
    const photo = (await getPhotos(p.db, user.userId, [sha])).get(sha)!;
    const out = (lens: string) => photo.lenses[lens]!.output as Record<string, any>;
    const d = out('describe');
    const a = out('accessibility');
    expect(Buffer.byteLength(d.title)).toBeLessThanOrEqual(64); // so IPTC ObjectName holds it uncut
    const originalPixels = await pixelHash(original);
    const aiDate = confidentDate(out('dating').estimatedDate);

    for (const formats of [['exif'], ['iptc'], ['xmp'], ['xmp', 'exif', 'iptc']] as EnrichFormat[][]) {
      const res = await enrich(user.liveKey, { imageBase64: original.toString('base64'), formats });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
      const body = res.json();
      const written = ENRICH_FORMATS.filter((f) => formats.includes(f));
      expect(body).toMatchObject({ object: 'enrichment', sha256: sha, formatsWritten: written, meta: { requestId: res.headers['x-request-id'], creditsCharged: 5, ai_generated: true } });
      expect(Number.isInteger(body.meta.processingTimeMs)).toBe(true);
      const enriched = Buffer.from(body.imageBase64, 'base64');
      expect(sha256Of(enriched)).not.toBe(sha);
      expect(await pixelHash(enriched), formats.join('+')).toBe(originalPixels);
      const t = await readBack(tool, enriched, 'jpg');
      expect(t['IFD0:Orientation']).toBe(6); // the camera's EXIF stays

      const gpsWritten = t['GPS:GPSProcessingMethod'] === GPS_METHOD;
      if (formats.includes('exif')) {
        expect(t['IFD0:ImageDescription']).toBe(d.caption);
        if (gpsWritten) {
          const c = out('location').coordinates;
          expect(t['GPS:GPSLatitude']).toBeCloseTo(Math.abs(c.latitude), 6);
          expect(t['GPS:GPSLatitudeRef']).toBe(c.latitude < 0 ? 'S' : 'N');
          expect(t['GPS:GPSLongitude']).toBeCloseTo(Math.abs(c.longitude), 6);
          expect(t['GPS:GPSHPositioningError']).toBe(Math.max(1, Math.round(c.uncertaintyKm * 1000)));
        }
      } else {
        expect(keysOf(t, /^(IFD0:ImageDescription|GPS:)/)).toEqual([]);
      }
      expect(t['ExifIFD:DateTimeOriginal']).toBeUndefined(); // an AI date never goes into EXIF

      if (formats.includes('iptc')) {
        expect(t).toMatchObject({ 'IPTC:ObjectName': d.title, 'IPTC:Headline': d.title, 'IPTC:Caption-Abstract': d.caption, 'IPTC:Writer-Editor': AI_WRITER });
        for (const tag of d.tags as string[]) expect(list(t['IPTC:Keywords']).map((k) => k.toLowerCase())).toContain(tag.toLowerCase());
        expect(t['IPTC:DateCreated']).toBe(aiDate ? iptcDate(aiDate) : undefined);
      } else {
        expect(keysOf(t, /^IPTC:/)).toEqual([]);
      }

      if (formats.includes('xmp')) {
        expect(t).toMatchObject({
          'XMP-dc:Title': d.title,
          'XMP-dc:Description': d.caption,
          'XMP-iptcCore:AltTextAccessibility': a.altText,
          'XMP-iptcCore:ExtDescrAccessibility': a.longDescription,
          'XMP-photoshop:CaptionWriter': AI_WRITER,
          'XMP-lenstack:Sha256': sha,
          'XMP-lenstack:AiGenerated': true,
        });
        expect(t['XMP-photoshop:DateCreated']).toEqual(aiDate ? xmpDate(aiDate) : undefined);
        if (formats.includes('iptc')) expect(list(t['XMP-dc:Subject'])).toEqual(list(t['IPTC:Keywords']));
        // Our namespace round-trips every record, complete.
        for (const lens of modules) {
          const r: LensRecord = photo.lenses[lens]!;
          expect(JSON.parse(t[lensProperty(lens)!] as string), lens).toEqual({ version: r.version, producedAt: r.producedAt, eventId: r.eventId, provider: r.provider, output: r.output });
        }
        expect(t['XMP-lenstack:Moderation']).toBeUndefined();
        expect(body.lensVersions).toEqual(Object.fromEntries(modules.sort().map((l) => [l, photo.lenses[l]!.version])));
      } else {
        expect(keysOf(t, /^XMP-(dc|lenstack|iptcCore|photoshop):/)).toEqual([]);
      }
      if (formats.join() === 'exif') expect(Object.keys(body.lensVersions)).toEqual(gpsWritten ? ['describe', 'location'] : ['describe']);
    }

    // 4 calls, 5 credits each, each one reserve then one settle.
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - 6 - 4 * ENRICH_CREDITS, reserved: 0 });
    const rows = await enrichRows(user.userId);
    expect(rows.map((r) => [r.kind, r.reserved, r.charged])).toEqual(Array(4).fill([['reserve', 5, 0], ['settle', -5, 5]]).flat());
    expect(new Set(rows.map((r) => r.reservation_id)).size).toBe(4);
    expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
    // Enrichment is not an analysis: the registry row is untouched.
    const after = (await getPhotos(p.db, user.userId, [sha])).get(sha)!;
    expect([after.analyzeCallCount, after.totalCreditsSpent]).toEqual([1, 6]);
  });

  it('a retry with the same x-request-id is billed once; the same id for other formats is a new call', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const bytes = photoBytes('Pentax_K10D.jpg');
    await seedRegistry(p.db, user.userId, bytes, fixtures('describe'));
    const body = { imageBase64: bytes.toString('base64'), formats: ['xmp'] };
    const headers = { 'x-request-id': `enrich-retry-${user.userId}` };
    const first = await enrich(user.liveKey, body, headers);
    const retry = await enrich(user.liveKey, body, headers);
    expect([first.statusCode, retry.statusCode]).toEqual([200, 200]);
    expect(retry.json().meta.creditsCharged).toBe(5);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 15, reserved: 0 });
    const other = await enrich(user.liveKey, { ...body, formats: ['exif'] }, headers);
    expect(other.statusCode).toBe(200);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    expect((await enrichRows(user.userId)).map((r) => r.kind)).toEqual(['reserve', 'settle', 'reserve', 'settle']);
  });

  it('imageUrl is fetched SSRF-safely and enriched like base64', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    await seedRegistry(p.db, user.userId, SERVED, fixtures('describe', 'accessibility'));
    const res = await enrich(user.liveKey, { imageUrl: `${server.origin}/image.jpg`, formats: ['xmp'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.json()).toMatchObject({ sha256: sha256Of(SERVED), formatsWritten: ['xmp'], lensVersions: { describe: '1.0.0', accessibility: '1.0.0' } });
    const t = await readBack(tool, Buffer.from(res.json().imageBase64, 'base64'), 'jpg');
    expect(t['XMP-iptcCore:AltTextAccessibility']).toBe(fixture('accessibility').altText);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5 });
  });
});

describe('POST /v2/enrich — facts the file already has are kept', () => {
  it('a photo with its own GPS and capture date keeps both; no AI date or coordinates anywhere', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('gps-DSCN0010.jpg');
    const before = await readBack(tool, bytes, 'jpg');
    await seedRegistry(p.db, user.userId, bytes, fixtures('describe', 'dating', 'location'));
    const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['exif', 'iptc', 'xmp'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    const t = await readBack(tool, Buffer.from(res.json().imageBase64, 'base64'), 'jpg');
    for (const k of keysOf(before, /^GPS:/)) expect(t[k], k).toEqual(before[k]);
    expect(keysOf(t, /^GPS:/)).toEqual(keysOf(before, /^GPS:/));
    expect(t['ExifIFD:DateTimeOriginal']).toBe('2008:10:22 16:28:39');
    expect(keysOf(t, /^XMP-exif:GPS|DateCreated$/)).toEqual([]);
    // Place names are not facts the file had: they go in.
    expect(t).toMatchObject({ 'XMP-photoshop:City': 'Paris', 'IPTC:City': 'Paris', 'IPTC:Province-State': 'Île-de-France' });
    // dating contributed nothing standard, but its record is in our block.
    expect(JSON.parse(t['XMP-lenstack:Dating'] as string).output).toEqual(fixture('dating'));
  });

  it('a photo with neither gets the confident AI date and coordinates, marked as an estimate with its error radius', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('orientation-portrait_8.jpg');
    await seedRegistry(p.db, user.userId, bytes, fixtures('dating', 'location'));
    const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['exif', 'iptc', 'xmp'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    const t = await readBack(tool, Buffer.from(res.json().imageBase64, 'base64'), 'jpg');
    expect(t).toMatchObject({
      'XMP-photoshop:DateCreated': 1978,
      'IPTC:DateCreated': '1978:00:00',
      'GPS:GPSLatitudeRef': 'N',
      'GPS:GPSLongitudeRef': 'E',
      'GPS:GPSHPositioningError': 300,
      'GPS:GPSProcessingMethod': GPS_METHOD,
      'XMP-exif:GPSProcessingMethod': GPS_METHOD,
      'XMP-iptcCore:CountryCode': 'FR',
    });
    expect(t['GPS:GPSLatitude']).toBeCloseTo(48.8571, 6);
    expect(t['XMP-exif:GPSLongitude']).toBeCloseTo(2.3413, 6);
    expect(t['ExifIFD:DateTimeOriginal']).toBeUndefined();
  });

  it("the file's keywords come first, ours follow; a Latin-1 IPTC record becomes UTF-8 without losing a character", async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('xmp-BlueSquare.jpg');
    await seedRegistry(p.db, user.userId, bytes, fixtures('describe', 'location'));
    const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['iptc', 'xmp'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    const t = await readBack(tool, Buffer.from(res.json().imageBase64, 'base64'), 'jpg');
    const own = ['XMP', 'Blue Square', 'test file', 'Photoshop', '.jpg'];
    const ours = [...(fixture('describe').tags as string[]), 'Pont Neuf', 'Statue of Henri IV'];
    expect(list(t['IPTC:Keywords'])).toEqual([...own, ...ours]);
    expect(list(t['XMP-dc:Subject'])).toEqual([...own, ...ours]);
    expect(t['IPTC:CodedCharacterSet']).toBe('\u001b%G');
    expect(t['IPTC:Province-State']).toBe('Île-de-France');
    // Replaced, not appended: the caption is ours now.
    expect(t['XMP-dc:Title']).toBe(fixture('describe').title);
    expect(t['IPTC:Caption-Abstract']).toBe(fixture('describe').caption);
    expect(t['XMP-xmp:CreatorTool']).toBe('Adobe Photoshop CS2 Macintosh');
  });
});

describe('POST /v2/enrich — containers', () => {
  it('TIFF, PNG and WebP are enriched in place with their writable blocks; pixels identical', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const small = sharp(photoBytes('orientation-landscape_1.jpg')).resize(200);
    const cases: Array<[string, Buffer, EnrichFormat[]]> = [
      ['tif', photoBytes('tiff-Arbitro.tiff'), ['exif', 'iptc', 'xmp']],
      ['png', await small.clone().png().toBuffer(), ['exif', 'iptc', 'xmp']],
      ['webp', await small.clone().webp().toBuffer(), ['exif', 'xmp']],
    ];
    for (const [ext, bytes, expected] of cases) {
      await seedRegistry(p.db, user.userId, bytes, fixtures('describe'));
      const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['exif', 'iptc', 'xmp'] });
      expect(res.statusCode, `${ext}: ${res.body.slice(0, 300)}`).toBe(200);
      expect(res.json().formatsWritten, ext).toEqual(expected);
      const enriched = Buffer.from(res.json().imageBase64, 'base64');
      expect((await sharp(enriched).metadata()).format, ext).toBe(ext === 'tif' ? 'tiff' : ext);
      expect(await pixelHash(enriched), ext).toBe(await pixelHash(bytes));
      const t = await readBack(tool, enriched, ext);
      expect(t['XMP-dc:Title'], ext).toBe(fixture('describe').title);
      expect(t['IFD0:ImageDescription'], ext).toBe(fixture('describe').caption);
      expect(t['IPTC:ObjectName'], ext).toBe(expected.includes('iptc') ? fixture('describe').title : undefined);
    }
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
  });

  it('an iPhone HEIC gets EXIF and XMP (the blocks HEIF holds), read back by exiftool; its capture date and GPS stay; 5 credits', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const heic = photoBytes('heic-IMG_5195.HEIC');
    const sha = await seedRegistry(p.db, user.userId, heic, fixtures('describe', 'dating', 'location'));
    const res = await enrich(user.liveKey, { imageBase64: heic.toString('base64'), formats: ['exif', 'iptc', 'xmp'] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ object: 'enrichment', sha256: sha, formatsWritten: ['exif', 'xmp'], meta: { creditsCharged: 5 } });
    const enriched = Buffer.from(res.json().imageBase64, 'base64');
    const t = await readBack(tool, enriched, 'heic');
    expect(t['IFD0:ImageDescription']).toBe(fixture('describe').caption);
    expect(t['XMP-dc:Title']).toBe(fixture('describe').title);
    expect(t['XMP-lenstack:Sha256']).toBe(sha);
    expect(keysOf(t, /^IPTC:/)).toEqual([]);
    // Facts from the phone are kept, not replaced by the AI's guesses.
    expect(t['ExifIFD:DateTimeOriginal']).toBe('2021:04:11 15:47:53');
    expect(t['GPS:GPSLatitude']).toBeCloseTo(39.05134, 4);
    expect(await pixelHash(enriched)).toBe(await pixelHash(heic));
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
  });

  it('a BMP (no metadata blocks exiftool can write) answers formatsWritten: [] with its own bytes and bills nothing', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const { data, info } = await sharp(photoBytes('Canon_40D.jpg')).raw().toBuffer({ resolveWithObject: true });
    const bmp = bmpOf(data, info.width, info.height);
    await seedRegistry(p.db, user.userId, bmp, fixtures('describe'));
    const res = await enrich(user.liveKey, { imageBase64: bmp.toString('base64'), formats: ['exif', 'iptc', 'xmp'] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ formatsWritten: [], meta: { creditsCharged: 0 } });
    expect(Buffer.from(res.json().imageBase64, 'base64').equals(bmp)).toBe(true);
    expect(await ledgerOf(p.db, user.userId)).toHaveLength(1);
  });

  it('a truncated HEIC is refused at intake with 422; nothing moves', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await enrich(user.liveKey, { imageBase64: photoBytes('heic-IMG_5195.HEIC').subarray(0, 400_000).toString('base64'), formats: ['xmp'] });
    expect(res.statusCode).toBe(422);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'IMAGE_INVALID' });
    expect(await ledgerOf(p.db, user.userId)).toHaveLength(1);
  });
});

describe('POST /v2/enrich — vendor text cannot inject exiftool arguments', () => {
  it('CR/LF, tabs, leading dashes, pipes and entities in lens output are written as inert text', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('Canon_40D.jpg');
    const before = await readBack(tool, bytes, 'jpg');
    const marker = `/tmp/lenstack-enrich-injected-${user.userId}`;
    const describeOut = {
      title: '\n-all=\n',
      caption: `-o ${marker}\r\n-EXIF:all=\n-execute`,
      description: '| rm -rf / ; &amp; &#10;',
      // (NUL cannot be stored: Postgres jsonb refuses \u0000; the exiftool tests cover it.)
      tags: ['-TagsFromFile', '@', `-o ${marker}`, 'x\t-all=', '|'],
    };
    const accessibilityOut = { ...fixture('accessibility'), altText: '-XMP:all=\n-overwrite_original_in_place', longDescription: `-w ${marker}` };
    await seedRegistry(p.db, user.userId, bytes, { describe: describeOut, accessibility: accessibilityOut });
    const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['exif', 'iptc', 'xmp'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    const t = await readBack(tool, Buffer.from(res.json().imageBase64, 'base64'), 'jpg');
    expect(t).toMatchObject({
      'XMP-dc:Title': ' -all= ',
      'IPTC:ObjectName': ' -all= ',
      'IFD0:ImageDescription': `-o ${marker}  -EXIF:all= -execute`,
      'XMP-dc:Description': writableText(describeOut.caption),
      'XMP-iptcCore:AltTextAccessibility': '-XMP:all= -overwrite_original_in_place',
      'XMP-iptcCore:ExtDescrAccessibility': `-w ${marker}`,
    });
    expect(list(t['IPTC:Keywords'])).toEqual(['-TagsFromFile', '@', `-o ${marker}`, 'x -all=', '|']);
    // The full records round-trip with their control characters intact (JSON-escaped).
    expect(JSON.parse(t['XMP-lenstack:Describe'] as string).output).toEqual(describeOut);
    expect(JSON.parse(t['XMP-lenstack:Accessibility'] as string).output).toEqual(accessibilityOut);
    // "-all=" deleted nothing, "-o"/"-w" created nothing.
    for (const k of ['IFD0:Make', 'IFD0:Model', 'ExifIFD:DateTimeOriginal', 'ExifIFD:FNumber', 'IFD0:Software']) expect(t[k], k).toEqual(before[k]);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('POST /v2/enrich — registry, credits and isolation', () => {
  it('a photo not in the registry → 404 PHOTO_NOT_IN_REGISTRY; no credit moves, no analysis runs', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    p.sim.reset();
    const res = await enrich(user.liveKey, { imageBase64: photoBase64('mobile-jolla.jpg'), formats: ['xmp'] });
    expect(res.statusCode).toBe(404);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'PHOTO_NOT_IN_REGISTRY', retryable: false });
    expect((await ledgerOf(p.db, user.userId)).map((r) => r.kind)).toEqual(['grant']);
    const stats = p.sim.stats();
    expect(stats.openai.calls + stats.anthropic.calls + stats.google.calls).toBe(0);
    const photos = await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId]);
    expect(photos.rows[0].n).toBe(0);
  });

  it('a photo with only moderation (quick-scan) has nothing to write → 404', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('Nikon_D70.jpg');
    await seedRegistry(p.db, user.userId, bytes, { moderation: fixture('moderation') });
    const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['xmp'] });
    expect(res.statusCode).toBe(404);
    expect(expectEnvelope(res.json()).message).toContain('moderation');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
  });

  it("another user's photo → 404 for me, and my balance does not move", async () => {
    const owner = await createTestAccount(p.db, { community: 10 });
    const other = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('hdr-canon_hdr_YES.jpg');
    await seedRegistry(p.db, owner.userId, bytes, fixtures('describe'));
    const res = await enrich(other.liveKey, { imageBase64: bytes.toString('base64'), formats: ['xmp'] });
    expect(res.statusCode).toBe(404);
    expect(expectEnvelope(res.json()).code).toBe('PHOTO_NOT_IN_REGISTRY');
    expect((await ledgerOf(p.db, other.userId)).map((r) => r.kind)).toEqual(['grant']);
    expect((await enrich(owner.liveKey, { imageBase64: bytes.toString('base64'), formats: ['xmp'] })).statusCode).toBe(200);
  });

  it('4 credits → 402 with the credits object (needed 5) and no-store; nothing moves', async () => {
    const user = await createTestAccount(p.db, { community: 3, purchased: 1 });
    const bytes = photoBytes('Canon_40D.jpg');
    await seedRegistry(p.db, user.userId, bytes, fixtures('describe'));
    const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['xmp'] });
    expect(res.statusCode).toBe(402);
    expect(res.headers['cache-control']).toBe('no-store, private');
    const e = expectEnvelope(res.json());
    expect(e).toMatchObject({ code: 'PLAN_LIMIT_EXCEEDED', retryable: false });
    expect(e.credits).toEqual({ needed: 5, community: 3, purchased: 1, total: 4, resetsInDays: 0 });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 3, purchased: 1, reserved: 0 });
    expect((await ledgerOf(p.db, user.userId)).map((r) => r.kind)).toEqual(['grant', 'grant']);
  });

  it('nothing of the records fits the requested blocks → 200 with the original bytes, formatsWritten [] and 0 credits', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('orientation-landscape_1.jpg');
    await seedRegistry(p.db, user.userId, bytes, fixtures('accessibility', 'people'));
    const res = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['exif', 'iptc'] });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ formatsWritten: [], lensVersions: {}, meta: { creditsCharged: 0 } });
    expect(Buffer.from(res.json().imageBase64, 'base64').equals(bytes)).toBe(true);
    expect((await ledgerOf(p.db, user.userId)).map((r) => r.kind)).toEqual(['grant']);
  });
});

describe('POST /v2/enrich — sandbox and auth', () => {
  it('a svc_test_ key writes the lens fixtures into any photo, needs no registry entry and bills nothing', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bytes = photoBytes('orientation-landscape_1.jpg');
    const res = await enrich(user.testKey, { imageBase64: bytes.toString('base64'), formats: ['iptc', 'xmp'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.json()).toMatchObject({ sha256: sha256Of(bytes), formatsWritten: ['iptc', 'xmp'], meta: { creditsCharged: 0, ai_generated: true } });
    expect(res.json().lensVersions).toEqual(Object.fromEntries([...SANDBOX_LENSES].sort().map((l) => [l, getLens(l).version])));
    const t = await readBack(tool, Buffer.from(res.json().imageBase64, 'base64'), 'jpg');
    expect(t['XMP-dc:Title']).toBe(fixture('describe').title);
    expect(JSON.parse(t['XMP-lenstack:People'] as string)).toMatchObject({ provider: 'sandbox', output: fixture('people') });
    expect((await ledgerOf(p.db, user.userId)).map((r) => r.kind)).toEqual(['grant']);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
  });

  it('no key, or the anonymous sandbox key (no account) → 401', async () => {
    const body = { imageBase64: photoBase64('Canon_40D.jpg'), formats: ['xmp'] };
    const none = await p.app.inject({ method: 'POST', url: '/v2/enrich', payload: body });
    expect(none.statusCode).toBe(401);
    const anon = await enrich(ANONYMOUS_SANDBOX_KEY, body);
    expect(anon.statusCode).toBe(401);
    expect(expectEnvelope(anon.json()).code).toBe('AUTH_FAILED');
  });
});

describe('POST /v2/enrich — validation (400) and image failures (422), before any credit moves', () => {
  const GOOD = photoBase64('Canon_40D.jpg');
  it.each([
    ['c2pa (deferred)', { imageBase64: GOOD, formats: ['xmp', 'c2pa'] }, 'deferred'],
    ['an unknown format', { imageBase64: GOOD, formats: ['png'] }, 'formats'],
    ['no formats', { imageBase64: GOOD }, 'formats'],
    ['empty formats', { imageBase64: GOOD, formats: [] }, 'formats'],
    ['5 formats', { imageBase64: GOOD, formats: ['xmp', 'xmp', 'exif', 'iptc', 'exif'] }, 'formats'],
    ['both image inputs', { imageBase64: GOOD, imageUrl: 'https://example.com/a.jpg', formats: ['xmp'] }, 'imageUrl'],
    ['no image', { formats: ['xmp'] }, 'imageUrl'],
    ['a relative URL', { imageUrl: 'a.jpg', formats: ['xmp'] }, 'imageUrl'],
    ['a URL over 2048 chars', { imageUrl: `https://example.com/${'a'.repeat(2048)}`, formats: ['xmp'] }, 'imageUrl'],
    ['empty base64', { imageBase64: '', formats: ['xmp'] }, 'imageBase64'],
    ['base64 outside the alphabet', { imageBase64: '!!!!', formats: ['xmp'] }, 'imageBase64'],
    ['an unknown field', { imageBase64: GOOD, formats: ['xmp'], refresh: true }, 'refresh'],
  ])('%s → 400 VALIDATION_FAILED', async (_name, body, mention) => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await enrich(user.liveKey, body);
    expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
    const e = expectEnvelope(res.json());
    expect(e).toMatchObject({ code: 'VALIDATION_FAILED', retryable: false });
    expect(e.message).toContain(mention);
    expect((await ledgerOf(p.db, user.userId)).map((r) => r.kind)).toEqual(['grant']);
  });

  it('an SSRF-blocked URL → 400 and no connection is made', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await enrich(user.liveKey, { imageUrl: `http://127.0.0.1:${canary.port}/secret`, formats: ['xmp'] });
    expect(res.statusCode).toBe(400);
    expect(canary.connections()).toBe(0);
  });

  it.each([
    ['bytes that are not an image', () => ({ imageBase64: Buffer.from('certainly not a picture').toString('base64') })],
    ['a URL answering 404', () => ({ imageUrl: `${server.origin}/missing` })],
    ['a truncated JPEG', () => ({ imageBase64: photoBytes('Canon_40D.jpg').subarray(0, 3000).toString('base64') })],
  ])('%s → 422 IMAGE_INVALID; nothing moves', async (_name, input) => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await enrich(user.liveKey, { ...input(), formats: ['xmp'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'IMAGE_INVALID', retryable: false });
    expect((await ledgerOf(p.db, user.userId)).map((r) => r.kind)).toEqual(['grant']);
  });
});

describe('POST /v2/enrich — failures after the reservation release it; the work dir never outlives the call', () => {
  let spyApp: TestApp;
  const seen: Array<{ file: string; mode: number }> = [];
  let failWith: Error | 'tamper' | null = null;

  beforeAll(async () => {
    const spy: MetadataTool = {
      read: (file) => tool.read(file),
      async write(file, tags) {
        seen.push({ file, mode: (await stat(dirname(file))).mode & 0o777 });
        if (failWith instanceof Error) throw failWith;
        await tool.write(file, tags);
        if (failWith === 'tamper') {
          // A writer that re-encoded would change the compressed data: flip one byte of it.
          const bytes = await readFile(file);
          const at = bytes.length - 200;
          bytes.writeUInt8(bytes.readUInt8(at) ^ 0xff, at);
          await writeFile(file, bytes);
        }
      },
      convertIptcToUtf8: (file) => tool.convertIptcToUtf8(file),
      end: async () => undefined,
    };
    spyApp = await buildTestApp({ deps: { metadata: spy } });
  });
  afterAll(async () => spyApp?.close());

  const spyEnrich = (key: string, bytes: Buffer) => enrich(key, { imageBase64: bytes.toString('base64'), formats: ['xmp'] }, {}, spyApp.app);

  it('success: the private 0700 directory is gone when the answer arrives', async () => {
    const user = await createTestAccount(spyApp.db, { community: 10 });
    const bytes = photoBytes('Nikon_D70.jpg');
    await seedRegistry(spyApp.db, user.userId, bytes, fixtures('describe'));
    failWith = null;
    seen.length = 0;
    const res = await spyEnrich(user.liveKey, bytes);
    expect(res.statusCode).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.mode).toBe(0o700);
    expect(existsSync(dirname(seen[0]!.file))).toBe(false);
  });

  it.each([
    ['exiftool crashes → 500, credits released', new Error('exiftool process ended'), 500, 'INTERNAL_ERROR'],
    ['exiftool rejects the file → 422, credits released', new MetadataFileError('Corrupted JPEG image'), 422, 'IMAGE_INVALID'],
    ['the image data changed during the write → 422 (the file\'s structure; retrying cannot help), credits released', 'tamper' as const, 422, 'IMAGE_INVALID'],
  ])('%s', async (_name, error, status, code) => {
    const user = await createTestAccount(spyApp.db, { community: 10 });
    const bytes = photoBytes('Pentax_K10D.jpg');
    await seedRegistry(spyApp.db, user.userId, bytes, fixtures('describe'));
    failWith = error;
    seen.length = 0;
    const res = await spyEnrich(user.liveKey, bytes);
    failWith = null;
    expect(res.statusCode).toBe(status);
    expect(expectEnvelope(res.json()).code).toBe(code);
    const rows = await ledgerOf(spyApp.db, user.userId);
    expect(rows.map((r) => [r.kind, r.reserved, r.charged])).toEqual([['grant', 0, 0], ['reserve', 5, 0], ['release', -5, 0]]);
    expect(await getBalance(spyApp.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    expect((await checkInvariants(spyApp.db, user.userId))[0]!.ok).toBe(true);
    expect(existsSync(dirname(seen[0]!.file))).toBe(false);

    // The same x-request-id cannot be replayed into a free enrichment.
    const id = `enrich-failed-${user.userId}`;
    failWith = error;
    await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['xmp'] }, { 'x-request-id': id }, spyApp.app);
    failWith = null;
    const replay = await enrich(user.liveKey, { imageBase64: bytes.toString('base64'), formats: ['xmp'] }, { 'x-request-id': id }, spyApp.app);
    expect(replay.statusCode).toBe(400);
    expect(expectEnvelope(replay.json()).message).toContain('x-request-id');
    expect(await getBalance(spyApp.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
  });
});

describe('POST /v2/enrich — OpenAPI', () => {
  it('documents the request (formats enum without c2pa) and the Enrichment response', async () => {
    const doc = (await p.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const op = doc.paths['/v2/enrich'].post;
    expect(op.security).toEqual([{ bearer: [] }]);
    expect(Object.keys(op.responses).sort()).toEqual(['200', '400', '401', '402', '404', '413', '415', '422', '429', 'default']);
    const schema = JSON.stringify(doc.components.schemas.EnrichRequest);
    expect(schema).toContain('"enum":["exif","iptc","xmp"]');
    expect(schema).not.toContain('c2pa"');
    expect(doc.components.schemas.Enrichment.required).toEqual(['object', 'imageBase64', 'formatsWritten', 'lensVersions', 'sha256', 'meta']);
  });
});
