import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { AppError } from '../../core/errors.ts';
import { createMetadataTool } from '../../enrich/exiftool.ts';
import { readExisting } from '../../enrich/mapping.ts';
import { decodeUpright } from '../../images/decode.ts';
import { fingerprint, hammingDistance } from '../../images/fingerprint.ts';
import { decodeForeign, isDecoderRefusal } from '../../images/foreign-decode.ts';
import { openImage } from '../../images/open.ts';
import { probeImage } from '../../images/probe.ts';
import { makeWorkCopy, prepareImage } from '../../vendors/resize.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { readBack } from '../enrich/helpers.ts';
import { photo } from './photos.ts';
import { readBmpHeader } from '../../images/bmp-header.ts';
import { bmpOf, bmpVariant, heicDeclaring, packRows } from './foreign-inputs.ts';
import { configureHeicDecoder, HEIF_DECODE_PROTOCOL, heicDecoder, heicDecoderNotice } from '../../images/heic-native.ts';
import { HEIC_DECODERS, onHeicDecoder, withHeicDecoder, type HeicDecoderMode } from '../helpers/heic-decoder.ts';
import { mutate } from '../hostile/images/mutate.ts';
import { prng } from '../hostile/support/prng.ts';
import { SEED } from '../hostile/sizes.ts';

/**
 * HEIC (HEVC in HEIF, the iPhone's format) and BMP, which the prebuilt sharp cannot decode:
 * images/open.ts hands them to the system's libheif (a heif-decode process) or libheif's WASM build,
 * and to bmp-ts, and every consumer (probe, fingerprint, vendor uploads) sees the same pixels. The
 * HEIC tests run on both HEIC decoders.
 */

const HEIC = photo('heic-IMG_5195.HEIC');
/** The same picture exported by libheif's own command-line tool (heif-convert), independently of our decoder. */
const HEIC_AS_JPEG = photo('heic-IMG_5195.heif-convert.jpg');
/** 23 flat megapixels in 5.7 KB (test/fixtures/crafted/README.md). */
const FLAT_4800 = readFileSync(new URL('../fixtures/crafted/flat-4800x4800.heic', import.meta.url));
const limits = { maxPixels: 100_000_000 };
const meanDiff = (x: Buffer, y: Buffer) => x.reduce((sum, v, i) => sum + Math.abs(v - y[i]!), 0) / x.length;

describe.each(HEIC_DECODERS)('HEIC, %s decoder', (mode) => {
  withHeicDecoder(mode);

  it(`goes to the ${mode} decoder`, async () => {
    expect((await heicDecoder()).backend).toBe(mode);
  });

  it('fingerprints within pHash distance 4 of its independent JPEG export, and far from another photo', async () => {
    const [heic, jpeg, other] = await Promise.all([fingerprint(HEIC), fingerprint(HEIC_AS_JPEG), fingerprint(photo('gps-DSCN0010.jpg'))]);
    expect({ width: heic.width, height: heic.height }).toEqual({ width: 2566, height: 3313 });
    expect(hammingDistance(heic.pHash, jpeg.pHash)).toBeLessThanOrEqual(4);
    expect(hammingDistance(heic.dHash, jpeg.dHash)).toBeLessThanOrEqual(4);
    expect(hammingDistance(heic.pHash, other.pHash)).toBeGreaterThan(10);
  });

  it('decodes to the same picture as heif-convert, pixel for pixel within JPEG noise', async () => {
    const [a, b, other] = await Promise.all([decodeUpright(HEIC, limits), decodeUpright(HEIC_AS_JPEG, limits), decodeUpright(photo('gps-DSCN0010.jpg'), limits)]);
    // JPEG q85 noise, plus up to ~0.6 because the export's Display P3 profile is converted to sRGB
    // and our HEIC pixels are taken as sRGB (docs/decisions.md, "Accepted formats").
    expect(meanDiff(a.rgb, b.rgb)).toBeLessThan(4);
    expect(meanDiff(a.rgb, other.rgb)).toBeGreaterThan(30);
  });

  it('becomes a vendor upload: an upright JPEG of the billed size, without metadata', async () => {
    const upload = await prepareImage('anthropic', HEIC);
    expect(upload.source).toEqual({ width: 2566, height: 3313 });
    const meta = await sharp(upload.data).metadata();
    expect(meta).toMatchObject({ format: 'jpeg', width: upload.width, height: upload.height });
    expect(upload.height).toBeGreaterThan(upload.width);
    expect(meta.exif).toBeUndefined();
  });

  it('a truncated file is refused as corrupt (libheif would fill the missing tiles with grey)', async () => {
    await expect(probeImage(HEIC.subarray(0, 400_000), limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/truncated/) });
  });

  it('garbage behind a HEIC ftyp brand is refused as unreadable', async () => {
    const garbage = Buffer.concat([HEIC.subarray(0, 32), Buffer.alloc(4096, 0x41)]);
    await expect(probeImage(garbage, limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
  });

  it('a HEIC whose coded data is larger or smaller than its declared size is refused by libheif', async () => {
    for (const [w, h] of [[100, 100], [3000, 4000]] as const) {
      await expect(probeImage(heicDeclaring(HEIC, w, h), limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/size signaled/) });
    }
  });

  it('23 coded megapixels behind a header declaring 100×100 are refused before they take the memory the header never asked for', async () => {
    const liar = heicDeclaring(FLAT_4800, 100, 100);
    await expect(probeImage(FLAT_4800, limits)).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE', message: expect.stringMatching(/decompression bomb/) });
    // The native decoder's data segment is capped from the declared size, so its allocation fails;
    // the WASM build's libheif (1.23) holds the image to its declared size itself.
    await expect(probeImage(liar, limits)).rejects.toMatchObject(
      mode === 'native'
        ? { code: 'IMAGE_INVALID', message: expect.stringMatching(/more memory than its declared size allows/) }
        : { code: 'IMAGE_TOO_LARGE', message: expect.stringMatching(/Image size 4800x4800 exceeds the maximum image size/) },
    );
  });

  it("the decoder checks the pixel limit itself before decoding (libheif's size, and its security limit)", async () => {
    await expect(decodeForeign('heif', HEIC, 2566 * 3313 - 1)).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE', message: expect.stringMatching(/2566×3313/) });
    const ok = await decodeForeign('heif', HEIC, 2566 * 3313);
    expect({ width: ok.width, height: ok.height, bytes: ok.pixels.length }).toEqual({ width: 2566, height: 3313, bytes: 2566 * 3313 * 3 });
  });

  it('the same bytes decoding at once share one decode; a later call decodes afresh', async () => {
    const [a, b] = await Promise.all([decodeForeign('heif', HEIC, limits.maxPixels), decodeForeign('heif', Buffer.from(HEIC), limits.maxPixels)]);
    // Booleans, not the objects: a failed assertion must not pretty-print 25 MB of pixels.
    expect(a === b).toBe(true);
    const later = await decodeForeign('heif', HEIC, limits.maxPixels);
    expect(later === a).toBe(false);
    expect(later.pixels.equals(a.pixels)).toBe(true);
  });

  it('byte mutants of the iPhone HEIC decode whole or are refused with a 422, never a server error', async () => {
    const random = prng(SEED).fork('heic-mutants');
    for (let i = 0; i < 6; i++) {
      const m = mutate(HEIC, random);
      const outcome = await decodeForeign('heif', m.bytes, limits.maxPixels).then(
        (d) => ({ decoded: `${d.width}×${d.height}` }),
        (err: AppError) => ({ refused: err.status }),
      );
      expect([{ decoded: '2566×3313' }, { refused: 422 }], m.recipe).toContainEqual(outcome);
    }
  });
});

describe('HEIC, either decoder', () => {
  it('the native and WASM decoders give the same picture and the same fingerprint', async () => {
    const decodeWith = (mode: HeicDecoderMode) => onHeicDecoder({ HEIC_DECODER: mode }, async () => ({ px: await decodeUpright(HEIC, limits), fp: await fingerprint(HEIC) }));
    const native = await decodeWith('native');
    const wasm = await decodeWith('wasm');
    expect(meanDiff(native.px.rgb, wasm.px.rgb)).toBeLessThan(1);
    expect({ pHash: native.fp.pHash, dHash: native.fp.dHash }).toEqual({ pHash: wasm.fp.pHash, dHash: wasm.fp.dHash });
  });

  it("exiftool reads its capture date, GPS and camera, and enrichment sees them as facts it must not overwrite", async () => {
    const tool = createMetadataTool({ maxProcs: 1 });
    try {
      const tags = await readBack(tool, HEIC, 'heic');
      expect(tags).toMatchObject({ 'IFD0:Make': 'Apple', 'IFD0:Model': 'iPhone 11 Pro Max', 'ExifIFD:DateTimeOriginal': '2021:04:11 15:47:53' });
      expect(tags['GPS:GPSLatitude']).toBeCloseTo(39.05134, 4);
      expect(tags['GPS:GPSLongitude']).toBeCloseTo(94.28877, 4);
      expect(tags['GPS:GPSLongitudeRef']).toBe('W');
      // No EXIF orientation: the HEIF container's own transformations (none here) are what libheif applies.
      expect(tags['IFD0:Orientation']).toBeUndefined();
      expect(readExisting(tags)).toMatchObject({ hasGps: true, hasCaptureDate: true });
    } finally {
      await tool.end();
    }
  });

  it('a HEIC declaring 60000×60000 is refused from its header, never decoded', async () => {
    const huge = heicDeclaring(HEIC, 60_000, 60_000);
    await expect(probeImage(huge, { ...limits, decode: false })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE', message: expect.stringMatching(/60000×60000/) });
    // Under a (raised) pixel limit but over 1,000 pixels per byte: the decompression-bomb ratio
    // refuses it, as for any format.
    const bomb = heicDeclaring(HEIC, 30_000, 30_000);
    await expect(probeImage(bomb, { maxPixels: 1_000_000_000, decode: false })).rejects.toMatchObject({
      code: 'IMAGE_TOO_LARGE',
      message: expect.stringMatching(/decompression bomb/),
    });
  });

  it('a few kilobytes of a HEIC (its header without the coded data) are refused before any decode', async () => {
    await expect(probeImage(HEIC.subarray(0, 4096), { ...limits, decode: false })).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
  });
});

describe('BMP', () => {
  // A 64×48 picture: red left half, blue right half, a green bottom row; written by hand, not by
  // the decoder's library, so a channel swap or a flipped row order would show.
  const W = 64;
  const H = 48;
  const rgb = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const [r, g, b] = y === H - 1 ? [0, 255, 0] : x < W / 2 ? [255, 0, 0] : [0, 0, 255];
      rgb.set([r, g, b], (y * W + x) * 3);
    }
  }

  it.each([['bottom-up', false], ['top-down', true]] as const)('a %s 24-bit BMP is read with the right colours and row order', async (_name, topDown) => {
    const bmp = bmpOf(rgb, W, H, { topDown });
    expect(await probeImage(bmp, limits)).toEqual({ format: 'bmp', mime: 'image/bmp', width: W, height: H });
    const decoded = await decodeForeign('bmp', bmp, limits.maxPixels);
    expect(decoded).toMatchObject({ width: W, height: H });
    expect(decoded.pixels.equals(rgb)).toBe(true);
  });

  it('fingerprints exactly like the same pixels as PNG', async () => {
    const png = await sharp(rgb, { raw: { width: W, height: H, channels: 3 } }).png().toBuffer();
    const [a, b] = await Promise.all([fingerprint(bmpOf(rgb, W, H)), fingerprint(png)]);
    expect({ pHash: a.pHash, dHash: a.dHash }).toEqual({ pHash: b.pHash, dHash: b.dHash });
  });

  it('a BMP cut short is refused before decoding; one declaring more pixels than allowed is too large', async () => {
    const bmp = bmpOf(rgb, W, H);
    await expect(probeImage(bmp.subarray(0, bmp.length - 10), limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/truncated/) });
    const huge = Buffer.from(bmp);
    huge.writeInt32LE(50_000, 18);
    huge.writeInt32LE(50_000, 22);
    await expect(probeImage(huge, limits)).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    // The decoder's own entry checks the limit too, for a caller that did not probe first.
    await expect(openImage(bmp, { maxPixels: W * H - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
  });

  it('"BM" followed by anything but a known DIB header is not a BMP', async () => {
    await expect(probeImage(Buffer.concat([Buffer.from('BM'), Buffer.alloc(60)]), limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/Unsupported image format/) });
  });
});

describe('BMP variants: each accepted one decodes to its exact pixels, the rest are refused by name', () => {
  // 7×5 (odd width: row padding matters), every pixel a different colour.
  const W = 7;
  const H = 5;
  const colour = (x: number, y: number): [number, number, number] => [x * 36 + 8, y * 60 + 4, (x * 5 + y * 11) * 3];
  const expected = (f: (v: number) => number = (v) => v) => {
    const out = Buffer.alloc(W * H * 3);
    for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) out.set(colour(x, y).map(f), (y * W + x) * 3);
    return out;
  };
  const five = (v: number) => v >> 3;
  const six = (v: number) => v >> 2;
  const accepted: Array<[string, Buffer, Buffer]> = [
    ['32-bit BI_RGB (x8r8g8b8)', bmpVariant(W, H, { depth: 32, rows: packRows(W, H, 4, (x, y) => { const [r, g, b] = colour(x, y); return (r << 16) | (g << 8) | b; }) }), expected()],
    [
      '32-bit BI_BITFIELDS, masks in RGBA byte order',
      bmpVariant(W, H, { depth: 32, compression: 3, masks: [0x000000ff, 0x0000ff00, 0x00ff0000], rows: packRows(W, H, 4, (x, y) => { const [r, g, b] = colour(x, y); return (0x7f << 24) | (b << 16) | (g << 8) | r; }) }),
      expected(),
    ],
    [
      '32-bit BI_BITFIELDS with alpha in a V5 header',
      bmpVariant(W, H, { depth: 32, compression: 3, headerSize: 124, masks: [0x00ff0000, 0x0000ff00, 0x000000ff, 0xff000000], rows: packRows(W, H, 4, (x, y) => { const [r, g, b] = colour(x, y); return ((0xff << 24) | (r << 16) | (g << 8) | b) >>> 0; }) }),
      expected(),
    ],
    // A V4/V5 header holds mask fields even for BI_RGB, often zero: BI_RGB means x8r8g8b8 whatever they say.
    ['32-bit BI_RGB in a V5 header with zero masks', bmpVariant(W, H, { depth: 32, headerSize: 124, rows: packRows(W, H, 4, (x, y) => { const [r, g, b] = colour(x, y); return (r << 16) | (g << 8) | b; }) }), expected()],
    ['24-bit in a V5 header', bmpVariant(W, H, { depth: 24, headerSize: 124, rows: packRows(W, H, 3, (x, y) => { const [r, g, b] = colour(x, y); return (r << 16) | (g << 8) | b; }) }), expected()],
    // 16-bit levels are 5 (or 6) bits: level v reads as v·8 (v·4), as Windows GDI reads them.
    ['16-bit BI_RGB (x1r5g5b5)', bmpVariant(W, H, { depth: 16, rows: packRows(W, H, 2, (x, y) => { const [r, g, b] = colour(x, y); return (five(r) << 10) | (five(g) << 5) | five(b); }) }), expected((v) => five(v) << 3)],
    [
      '16-bit BI_BITFIELDS (r5g6b5)',
      bmpVariant(W, H, { depth: 16, compression: 3, masks: [0xf800, 0x07e0, 0x001f], rows: packRows(W, H, 2, (x, y) => { const [r, g, b] = colour(x, y); return (five(r) << 11) | (six(g) << 5) | five(b); }) }),
      (() => { const e = expected(); for (let i = 0; i < e.length; i++) e[i] = i % 3 === 1 ? six(e[i]!) << 2 : five(e[i]!) << 3; return e; })(),
    ],
    // Pixel rows that start after a gap (bfOffBits beyond the headers): read from bfOffBits, not from the gap.
    ['24-bit with a gap before its pixel rows', bmpVariant(W, H, { depth: 24, gap: 16, rows: packRows(W, H, 3, (x, y) => { const [r, g, b] = colour(x, y); return (r << 16) | (g << 8) | b; }) }), expected()],
  ];

  it.each(accepted)('%s decodes to the exact pixels written', async (_name, bmp, want) => {
    expect(await probeImage(bmp, limits)).toEqual({ format: 'bmp', mime: 'image/bmp', width: W, height: H });
    const { data, info } = await (await openImage(bmp, limits)).raw().toBuffer({ resolveWithObject: true });
    expect({ width: info.width, height: info.height, channels: info.channels }).toEqual({ width: W, height: H, channels: 3 });
    // Booleans plus the first differing pixel: readable when it fails.
    const firstDiff = data.findIndex((v, i) => v !== want[i]);
    expect({ same: data.equals(want), firstDiff }).toEqual({ same: true, firstDiff: -1 });
  });

  const grey: Array<[number, number, number]> = Array.from({ length: 16 }, (_, i) => [i * 17, i * 17, i * 17]);
  const refused: Array<[string, Buffer, RegExp]> = [
    ['8-bit palette', bmpVariant(W, H, { depth: 8, palette: grey, rows: Buffer.alloc(8 * H, 3) }), /8-bit palette BMP is not supported; convert to PNG/],
    ['4-bit palette', bmpVariant(W, H, { depth: 4, palette: grey, rows: Buffer.alloc(4 * H, 0x35) }), /4-bit palette BMP is not supported; convert to PNG/],
    ['1-bit', bmpVariant(W, H, { depth: 1, palette: [[0, 0, 0], [255, 255, 255]], rows: Buffer.alloc(4 * H, 0xaa) }), /1-bit palette BMP is not supported; convert to PNG/],
    ['RLE8', bmpVariant(W, H, { depth: 8, compression: 1, palette: grey, rows: Buffer.from([W, 5, 0, 0, W, 5, 0, 0, W, 5, 0, 0, W, 5, 0, 0, W, 5, 0, 1]) }), /RLE8-compressed BMP is not supported; convert to PNG/],
    ['RLE4', bmpVariant(W, H, { depth: 4, compression: 2, palette: grey, rows: Buffer.from([W, 0x55, 0, 0, W, 0x55, 0, 0, W, 0x55, 0, 0, W, 0x55, 0, 0, W, 0x55, 0, 1]) }), /RLE4-compressed BMP is not supported; convert to PNG/],
  ];

  it.each(refused)('%s is refused from its header, naming the variant, before any decode', async (_name, bmp, message) => {
    await expect(probeImage(bmp, { ...limits, decode: false })).rejects.toMatchObject({ code: 'IMAGE_INVALID', retryable: false, message: expect.stringMatching(message) });
    await expect(openImage(bmp, limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(message) });
  });
});

describe('hostile BMP headers', () => {
  const oneByOne = (v: { clrUsed?: number; offset?: number; pad?: number } = {}) => {
    const bmp = Buffer.concat([bmpVariant(1, 1, { depth: 24, rows: Buffer.from([1, 2, 3, 0]), ...(v.clrUsed === undefined ? {} : { clrUsed: v.clrUsed }) }), Buffer.alloc(v.pad ?? 0)]);
    if (v.offset !== undefined) bmp.writeUInt32LE(v.offset, 10);
    return bmp;
  };

  it('a palette of 0xFFFFFFFF colours (a 26 s, 2 GB decode in bmp-ts) is refused from the header', async () => {
    const bmp = oneByOne({ clrUsed: 0xffffffff, pad: 1_000_000 });
    expect(() => readBmpHeader(bmp)).toThrow(/4294967295 palette colours/);
    await expect(probeImage(bmp, { ...limits, decode: false })).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/palette/) });
    // Over 256 is no BMP palette at any depth.
    expect(() => readBmpHeader(oneByOne({ clrUsed: 257, pad: 2000 }))).toThrow(/257 palette colours/);
  });

  it('an OS/2 or unknown DIB header size is refused by name, not read with the Windows layout', async () => {
    for (const size of [12, 16, 64, 41]) {
      const bmp = oneByOne({});
      bmp.writeUInt32LE(size, 14);
      expect(() => readBmpHeader(bmp)).toThrow(new RegExp(`BMP with a ${size}-byte header \\(OS/2 or unknown\\) is not supported`));
    }
    expect(() => readBmpHeader(oneByOne({}))).not.toThrow();
  });

  it('pixel rows declared inside the palette, or past the end of the file, are refused', async () => {
    // 4 palette colours end at byte 70; rows declared at 54 would be read from the palette.
    expect(() => readBmpHeader(oneByOne({ clrUsed: 4, offset: 54, pad: 16 }))).toThrow(/pixel data at byte 54, before the end of its headers and palette \(byte 70\)/);
    expect(() => readBmpHeader(oneByOne({ offset: 10_000 }))).toThrow(/pixel data at byte 10000, past the end of its 58 bytes/);
  });

  it('a decoder that runs away on the JS heap ends its own worker, not the process', async () => {
    // Straight to the decoder (open.ts would refuse the header): bmp-ts builds an object per
    // declared palette colour until the bytes run out; the worker's heap limit stops it.
    const bmp = oneByOne({ clrUsed: 0xffffffff, pad: 24_000_000 });
    await expect(decodeForeign('bmp', bmp, limits.maxPixels)).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/more memory than/) });
    // The process decodes on.
    const ok = await decodeForeign('bmp', bmpOf(Buffer.from([9, 8, 7]), 1, 1), limits.maxPixels);
    expect([...ok.pixels]).toEqual([9, 8, 7]);
  });
});

describe('the decode queue, and failures that are the server\'s, not the image\'s', () => {
  const tiny = (i: number) => bmpOf(Buffer.from([i, 255 - i, 7]), 1, 1);

  it('beyond 2 decoding and 8 waiting, a decode is answered 503 with Retry-After at once; the others decode', async () => {
    // All twelve ask in the same tick: 2 take the slots, 8 wait, 2 find the queue full.
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => decodeForeign('bmp', tiny(i), limits.maxPixels)));
    expect(results.map((r) => r.status)).toEqual([...Array(10).fill('fulfilled'), 'rejected', 'rejected']);
    expect(results.slice(0, 10).map((r) => (r.status === 'fulfilled' ? r.value.pixels[0] : -1))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const r of results.slice(10)) {
      expect(r.status === 'rejected' && r.reason).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, retryable: true, headers: { 'retry-after': '2' } });
      expect(isDecoderRefusal(r.status === 'rejected' && r.reason)).toBe(false);
    }
  });

  it('a decode that waits for a slot past its deadline is answered 503; one whose caller aborts leaves the queue', async () => {
    // Two HEIC decodes (distinct keys: different limits) hold both slots for far longer than 1 ms.
    const heics = [decodeForeign('heif', HEIC, limits.maxPixels), decodeForeign('heif', HEIC, limits.maxPixels - 1)];
    const late = decodeForeign('bmp', tiny(1), limits.maxPixels, { queueWaitMs: 1 }).catch((e: unknown) => e);
    const caller = new AbortController();
    const abandoned = decodeForeign('bmp', tiny(2), limits.maxPixels, { signal: caller.signal }).catch((e: unknown) => e);
    caller.abort(new Error('client went away'));
    expect(await late).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, message: expect.stringMatching(/No image decoder was free within 0.001 s/), headers: { 'retry-after': '5' } });
    expect(await abandoned).toMatchObject({ message: 'client went away' });
    const decoded = await Promise.all(heics);
    expect(decoded.map((d) => d.width)).toEqual([2566, 2566]);
  });

  describe.each(HEIC_DECODERS)('%s decoder', (mode) => {
    withHeicDecoder(mode);

    it('a decode the server did not finish in time is a retryable 503, not a refusal of the image', async () => {
      // Starting a worker or a process, and decoding 8.5 MP, take far more than 1 ms.
      const err = await decodeForeign('heif', HEIC, limits.maxPixels, { timeoutMs: 1 }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, retryable: true, message: expect.stringMatching(/took over 0.001 s/) });
      expect(isDecoderRefusal(err)).toBe(false);
      // The same image decodes when the server has the time.
      expect((await decodeForeign('heif', HEIC, limits.maxPixels)).height).toBe(3313);
    });
  });
});

describe('the native decoder runs in processes of its own: what they do cannot reach this one', () => {
  /**
   * Stand-ins for heif-decode --serve: Node scripts that speak its protocol (requests on stdin,
   * pixels on stdout, frames on fd 3) and answer each request as the test says, as a hostile file
   * could make the real decoder answer. Each notes its pid per request where the test reads it; the
   * n-th request to any of a stand-in's processes gets its n-th answer.
   */
  let dir: string;
  const standIn = async (name: string, answers: string): Promise<string> => {
    const path = join(dir, name);
    const script = `#!${process.execPath}
const { appendFileSync, readFileSync, writeSync } = require('node:fs');
if (process.argv[2] === '--version') { console.log('heif-decode protocol ${HEIF_DECODE_PROTOCOL} libheif stand-in'); process.exit(0); }
const frame = (type, payload) => { const head = Buffer.alloc(5); head.write(type, 0, 'latin1'); head.writeUInt32LE(payload.length, 1); writeSync(3, Buffer.concat([head, payload])); };
const ended = (status) => { const code = Buffer.alloc(4); code.writeInt32LE(status); frame('X', code); };
const pixels = (width, height, bytes) => { const head = Buffer.alloc(12); head.write('RGB8', 0, 'latin1'); head.writeUInt32LE(width, 4); head.writeUInt32LE(height, 8); writeSync(1, Buffer.concat([head, Buffer.from(bytes)])); };
const answers = [${answers}];
const pids = __filename + '.pids';
let pending = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 24 && pending.length >= 24 + pending.readUInt32LE(4)) {
    pending = pending.subarray(24 + pending.readUInt32LE(4));
    // The n-th request to any process of this stand-in gets the n-th answer.
    let served = '';
    try { served = readFileSync(pids, 'utf8'); } catch {}
    appendFileSync(pids, process.pid + '\\n');
    (answers[served.split('\\n').filter(Boolean).length] ?? (() => {}))();
  }
});
`;
    await writeFile(path, script, { mode: 0o755 });
    return path;
  };
  const pidsOf = async (path: string) => (await readFile(`${path}.pids`, 'utf8').catch(() => '')).split('\n').filter(Boolean).map(Number);
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const until = async (ok: () => Promise<boolean>) => {
    while (!(await ok())) await new Promise((r) => setTimeout(r, 10));
  };
  const using = <T>(path: string, run: () => Promise<T>): Promise<T> =>
    onHeicDecoder({ HEIC_DECODER: 'native', HEIC_DECODER_PATH: path }, async () => {
      expect(await heicDecoder()).toMatchObject({ backend: 'native', libheif: 'stand-in' });
      return run();
    });
  const decode = (opts: { timeoutMs?: number; signal?: AbortSignal; maxPixels?: number } = {}) =>
    decodeForeign('heif', HEIC, opts.maxPixels ?? limits.maxPixels, opts).catch((e: unknown) => e as AppError);
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'heif-decode-stand-ins-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a refusal leaves the server for the next image (one process start for many images)', async () => {
    const refuses = await standIn('refuses', "() => { frame('M', Buffer.from('HEIF could not be read: stand-in')); ended(2); }, () => { pixels(1, 1, [1, 2, 3]); ended(0); }");
    const [first, second] = await using(refuses, async () => [await decode(), await decode()]);
    expect(first).toMatchObject({ code: 'IMAGE_INVALID', retryable: false, message: 'HEIF could not be read: stand-in' });
    expect(second).toMatchObject({ width: 1, height: 1, pixels: Buffer.from([1, 2, 3]) });
    const pids = await pidsOf(refuses);
    expect(pids).toHaveLength(2);
    expect(pids[0]).toBe(pids[1]);
  });

  it('a decoder that crashes on a file refuses the file (422, final); its server is replaced and decoding goes on', async () => {
    const crash = await standIn('crash', '() => ended(-11), () => { pixels(1, 1, [9, 8, 7]); ended(0); }');
    const [first, second] = await using(crash, async () => [await decode(), await decode()]);
    expect(first).toMatchObject({ code: 'IMAGE_INVALID', retryable: false, message: expect.stringMatching(/crashed on this file \(SIGSEGV\)/) });
    expect(isDecoderRefusal(first)).toBe(true);
    // The server that saw the crash was ended; a fresh one decoded the next image.
    const pids = await pidsOf(crash);
    expect(pids).toHaveLength(2);
    expect(pids[0]).not.toBe(pids[1]);
    expect(alive(pids[0]!)).toBe(false);
    expect((second as { pixels: Buffer }).pixels).toEqual(Buffer.from([9, 8, 7]));
  });

  it('a decoder that hangs is killed at the timeout: 503, and its process is gone', async () => {
    const hang = await standIn('hang', '');
    const err = await using(hang, () => decode({ timeoutMs: 500 }));
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, message: expect.stringMatching(/took over 0.5 s/) });
    const [pid] = await pidsOf(hang);
    await until(async () => !alive(pid!));
  });

  it('a decoder whose only caller went away is killed at once', async () => {
    const hang = await standIn('hang-abandoned', '');
    const caller = new AbortController();
    const err = await using(hang, async () => {
      const decoding = decode({ signal: caller.signal });
      await until(async () => (await pidsOf(hang)).length === 1);
      caller.abort(new Error('client went away'));
      return decoding;
    });
    expect(err).toMatchObject({ message: 'client went away' });
    const [pid] = await pidsOf(hang);
    await until(async () => !alive(pid!));
  });

  it('output is taken only as far as its header announces, within the pixel limit', async () => {
    // Announces 1×1 (3 bytes), writes 6.
    const overflow = await standIn('overflow', '() => { pixels(1, 1, [1, 2, 3, 4, 5, 6]); ended(0); }');
    expect(await using(overflow, () => decode())).toMatchObject({ code: 'INTERNAL_ERROR', message: expect.stringMatching(/more than the 1×1 pixels it announced/) });
    // Announces 4096×4096, over the caller's limit: nothing is allocated for it, and the server goes.
    const huge = await standIn('huge', '() => pixels(4096, 4096, [])');
    expect(await using(huge, () => decode({ maxPixels: 4096 * 4096 - 1 }))).toMatchObject({ code: 'INTERNAL_ERROR', message: expect.stringMatching(/malformed header \(4096×4096\)/) });
    const [pid] = await pidsOf(huge);
    await until(async () => !alive(pid!));
  });

  it('is detected once per setting: auto falls back to WASM, with a warning saying how to build it; native refuses to start without it', async () => {
    const missing = join(dir, 'not-built');
    try {
      const auto = await configureHeicDecoder({ HEIC_DECODER: 'auto', HEIC_DECODER_PATH: missing });
      expect(auto).toMatchObject({ backend: 'wasm', why: expect.stringMatching(/no native HEIC decoder at .*not-built \(not built\); `npm run heic-decoder` builds it/) });
      expect(heicDecoderNotice(auto)).toMatchObject({ level: 'warn', message: expect.stringMatching(/WASM build/) });
      // Decodes on the fallback.
      expect((await decodeForeign('heif', HEIC, limits.maxPixels)).height).toBe(3313);
      await expect(configureHeicDecoder({ HEIC_DECODER: 'native', HEIC_DECODER_PATH: missing })).rejects.toThrow(/HEIC_DECODER=native, but no native HEIC decoder/);
      const forced = await configureHeicDecoder({ HEIC_DECODER: 'wasm' });
      expect(heicDecoderNotice(forced)).toEqual({ level: 'info', message: expect.stringMatching(/HEIC_DECODER=wasm/) });
      // A binary that is not heif-decode, or an older protocol, is not taken.
      const older = join(dir, 'older');
      await writeFile(older, '#!/bin/sh\necho "heif-decode protocol 1 libheif 1.15.1"\n', { mode: 0o755 });
      expect(await configureHeicDecoder({ HEIC_DECODER: 'auto', HEIC_DECODER_PATH: older })).toMatchObject({ backend: 'wasm', why: expect.stringMatching(`protocol 1, not ${HEIF_DECODE_PROTOCOL}`) });
    } finally {
      await configureHeicDecoder({ HEIC_DECODER: inject('heicDecoder') });
    }
  });
});

describe("every decode of a HEIC or BMP is held to the configured pixel limit, not sharp's 268 MP", () => {
  const heicPixels = 2566 * 3313;
  const bmp = bmpOf(Buffer.alloc(64 * 48 * 3, 90), 64, 48);

  it('the fingerprint and embedding decode', async () => {
    await expect(decodeUpright(HEIC, { maxPixels: heicPixels - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE', message: expect.stringMatching(/2566×3313/) });
    await expect(fingerprint(HEIC, { maxPixels: heicPixels - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    await expect(fingerprint(bmp, { maxPixels: 64 * 48 - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    expect((await fingerprint(bmp, { maxPixels: 64 * 48 })).width).toBe(64);
  });

  it("the worker's work copy and a vendor upload from the original", async () => {
    await expect(makeWorkCopy(HEIC, 'openai', heicPixels - 1)).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    const copies = createWorkCopies({ read: async () => bmp, maxBytes: 1 << 20, maxPixels: 64 * 48 - 1 });
    await expect(copies.get('a'.repeat(64), 'openai')).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    await expect(prepareImage('anthropic', bmp, 64 * 48 - 1)).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    expect((await prepareImage('anthropic', bmp, 64 * 48)).source).toEqual({ width: 64, height: 48 });
  });
});
