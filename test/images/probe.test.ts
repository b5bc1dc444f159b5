import { UNREADABLE_IMAGE } from '../../core/errors.ts';
import { readdirSync } from 'node:fs';
import sharp, { type Sharp } from 'sharp';
import { describe, expect, it } from 'vitest';
import { probeImage } from '../../images/probe.ts';
import { HEIC_DECODERS, onHeicDecoder } from '../helpers/heic-decoder.ts';
import { solidPngBomb } from './bomb.ts';
import { PHOTOS_DIR, photo } from './photos.ts';

const limits = { maxPixels: 100_000_000 };

describe('probeImage on the shared camera photos', () => {
  // Upright (display) sizes; orientation is the file's EXIF tag.
  const expected: Record<string, { width: number; height: number; orientation?: number }> = {
    'Canon_40D.jpg': { width: 100, height: 68, orientation: 1 },
    'Nikon_D70.jpg': { width: 100, height: 66, orientation: 1 },
    'Pentax_K10D.jpg': { width: 100, height: 72, orientation: 1 },
    'gps-DSCN0010.jpg': { width: 640, height: 480, orientation: 1 },
    'gps-DSCN0012.jpg': { width: 640, height: 480, orientation: 1 },
    'gps-DSCN0021.jpg': { width: 640, height: 480, orientation: 1 },
    'hdr-canon_hdr_NO.jpg': { width: 1536, height: 2048, orientation: 6 }, // stored 2048×1536
    'hdr-canon_hdr_YES.jpg': { width: 1536, height: 2048, orientation: 6 },
    // exif-samples files these under "invalid" for their metadata (an XMP-only APP1 that trips
    // some EXIF parsers); the pictures themselves are intact and decode without a warning.
    'invalid-image01137.jpg': { width: 88, height: 64 },
    'invalid-image01551.jpg': { width: 61, height: 58 },
    'mobile-jolla.jpg': { width: 3264, height: 2448, orientation: 1 },
    'orientation-landscape_1.jpg': { width: 600, height: 450, orientation: 1 },
    'orientation-landscape_6.jpg': { width: 600, height: 450, orientation: 6 }, // stored 450×600
    'orientation-portrait_8.jpg': { width: 450, height: 600, orientation: 8 }, // stored 600×450
    'tests-67-0_length_string.jpg': { width: 4032, height: 2012, orientation: 1 },
    'xmp-BlueSquare.jpg': { width: 360, height: 216, orientation: 1 },
    'xmp-no_exif.jpg': { width: 322, height: 466, orientation: 1 },
    // heif-convert's JPEG export of heic-IMG_5195.HEIC (libheif's own decoder, not ours).
    'heic-IMG_5195.heif-convert.jpg': { width: 2566, height: 3313 },
  };

  it('covers every file in the shared folder', () => {
    const files = readdirSync(PHOTOS_DIR).filter((f) => f !== 'ATTRIBUTION');
    expect(files.sort()).toEqual([...Object.keys(expected), 'heic-IMG_5195.HEIC', 'tiff-Arbitro.tiff'].sort());
  });

  it.each(Object.entries(expected))('%s is a JPEG of the expected upright size', async (name, size) => {
    expect(await probeImage(photo(name), limits)).toEqual({ format: 'jpeg', mime: 'image/jpeg', ...size });
  });

  it('reads the TIFF', async () => {
    expect(await probeImage(photo('tiff-Arbitro.tiff'), limits)).toEqual({ format: 'tiff', mime: 'image/tiff', width: 174, height: 38, orientation: 1 });
  });

  it.each(HEIC_DECODERS)('reads and fully decodes the iPhone HEIC (HEVC, through the %s libheif): upright size, no EXIF orientation applied', async (mode) => {
    const probed = await onHeicDecoder({ HEIC_DECODER: mode }, () => probeImage(photo('heic-IMG_5195.HEIC'), limits));
    expect(probed).toEqual({ format: 'heif', mime: 'image/heif', width: 2566, height: 3313 });
  });
});

describe('probeImage on other formats and broken files', () => {
  const source = photo('gps-DSCN0010.jpg');
  const encoders: Record<string, (s: Sharp) => Sharp> = {
    jpeg: (s) => s.jpeg(),
    'progressive jpeg': (s) => s.jpeg({ progressive: true }),
    png: (s) => s.png(),
    webp: (s) => s.webp(),
    gif: (s) => s.gif({ effort: 1 }),
    tiff: (s) => s.tiff(),
    avif: (s) => s.avif({ effort: 0 }),
  };
  // Each format is encoded once and shared by the tests below (GIF quantisation is slow).
  const encoded = new Map<string, Promise<Buffer>>();
  const encode = (kind: string) => {
    if (!encoded.has(kind)) encoded.set(kind, encoders[kind]!(sharp(source)).toBuffer());
    return encoded.get(kind)!;
  };

  it.each([
    ['png', 'png', 'image/png'],
    ['webp', 'webp', 'image/webp'],
    ['gif', 'gif', 'image/gif'],
    ['tiff', 'tiff', 'image/tiff'],
    ['avif', 'avif', 'image/avif'],
  ])('accepts %s', async (kind, format, mime) => {
    const probed = await probeImage(await encode(kind), limits);
    expect(probed).toMatchObject({ format, mime, width: 640, height: 480 });
  });

  // Headers of truncated JPEG, PNG and AVIF still parse: only the decode check catches these.
  it.each(Object.keys(encoders).flatMap((kind) => [[kind, 0.5], [kind, 0.9], [kind, 0.99]] as const))(
    'rejects %s truncated to %s of its length',
    async (kind, fraction) => {
      const whole = await encode(kind);
      const cut = whole.subarray(0, Math.floor(whole.length * fraction));
      await expect(probeImage(cut, limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    },
  );

  it.each([
    ['empty', Buffer.alloc(0)],
    ['random bytes', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 251))],
    ['text', Buffer.from('hello, this is not an image')],
    ['SVG (never handed to a parser)', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>')],
    ['a JPEG signature and nothing else', Buffer.from([0xff, 0xd8, 0xff, 0xe0])],
    ['a PDF', Buffer.from('%PDF-1.4\n%âãÏÓ\n')],
  ])('rejects %s as IMAGE_INVALID', async (_name, bytes) => {
    await expect(probeImage(bytes, limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
  });

  it('rejects a JPEG with a bogus Huffman table', async () => {
    const corrupt = Buffer.from(source);
    const dht = jpegSegmentOffset(corrupt, 0xc4);
    corrupt.fill(0xff, dht + 5, dht + 21); // code-length counts that cannot form a Huffman code
    // Lenstack's sentence for the caller; libvips's own words kept as the cause, for the logs.
    await expect(probeImage(corrupt, limits)).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: UNREADABLE_IMAGE, cause: expect.objectContaining({ message: expect.stringMatching(/Huffman/) }) });
  });

  it('accepts a complete JPEG whose scan data libjpeg only warns about (policy: fail on errors, not warnings)', async () => {
    // Damaged entropy-coded bytes decode to wrong pixels without an error; browsers show such files too.
    const damaged = Buffer.from(source);
    const middle = Math.floor(damaged.length / 2);
    damaged.fill(0xff, middle, middle + 2000);
    await expect(probeImage(damaged, limits)).resolves.toMatchObject({ format: 'jpeg', width: 640, height: 480 });
  });
});

/** Offset of the first top-level JPEG segment with this marker (skipping the EXIF thumbnail's own). */
function jpegSegmentOffset(jpeg: Buffer, marker: number): number {
  for (let at = 2; at < jpeg.length; at += 2 + jpeg.readUInt16BE(at + 2)) {
    if (jpeg[at + 1] === marker) return at;
    if (jpeg[at + 1] === 0xda) break;
  }
  throw new Error(`no segment 0x${marker.toString(16)}`);
}

describe('probeImage pixel cap', () => {
  it('rejects a 30000×30000 decompression bomb from its header, never decoding it', async () => {
    const bomb = solidPngBomb(30_000, 30_000);
    expect(bomb.length).toBeLessThan(200_000); // 900 million pixels in ~110 kB
    // The same refusal with the decode switched off: it comes from the header alone (no timed
    // assertion; the speed is bench material).
    for (const decode of [true, false]) {
      await expect(probeImage(bomb, { ...limits, decode })).rejects.toMatchObject({
        code: 'IMAGE_TOO_LARGE',
        status: 422,
        message: expect.stringContaining('30000×30000'),
      });
    }
  });

  it('applies the cap at exactly width × height', async () => {
    const bytes = photo('gps-DSCN0010.jpg'); // 640×480
    await expect(probeImage(bytes, { maxPixels: 640 * 480 })).resolves.toMatchObject({ width: 640 });
    await expect(probeImage(bytes, { maxPixels: 640 * 480 - 1 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
  });
});
