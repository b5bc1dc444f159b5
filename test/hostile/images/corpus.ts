import { readdirSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import sharp from 'sharp';
import { PHOTOS_DIR, photoBytes } from '../../helpers/photos.ts';
import { solidPngBomb } from '../../images/bomb.ts';
import { bmpOf, heicDeclaring } from '../../images/foreign-inputs.ts';
import type { Prng } from '../support/prng.ts';
import * as C from './containers.ts';
import { mutate } from './mutate.ts';

/**
 * The hostile image corpus, generated at test time from the shared photos (nothing big is
 * committed). Each case says what the service must do with it:
 *  - reject: 4xx on every endpoint (with this exact code when `code` is set);
 *  - accept: taken in on every endpoint (the file is a picture, however odd);
 *  - either: mutants, whose fate nobody can predict; every endpoint must agree.
 */

export type ImageCategory =
  | 'bombs over the pixel cap'
  | 'bombs under the pixel cap'
  | 'nested and recursive structures'
  | 'truncated files'
  | 'byte mutants of the shared photos'
  | 'shared invalid-* photos (intact)'
  | 'shared photos'
  | 'empty and tiny'
  | 'masquerading files';

export interface ImageCase {
  category: ImageCategory;
  name: string;
  /** The request's base64 field; usually the base64 of real bytes. */
  base64: string;
  expect: 'reject' | 'accept' | 'either';
  status?: 400 | 422;
  code?: 'VALIDATION_FAILED' | 'IMAGE_INVALID' | 'IMAGE_TOO_LARGE';
}

export interface CorpusSize {
  mutants: number;
  truncationsPerFormat: number;
  /** The 100 MP progressive JPEG and GIF bombs, seconds of CPU and 0.7-1.6 GB each (full runs only). */
  heavyBombs: boolean;
}

const b64 = (b: Buffer) => b.toString('base64');
const TOO_LARGE = { expect: 'reject', status: 422, code: 'IMAGE_TOO_LARGE' } as const;
const INVALID = { expect: 'reject', status: 422, code: 'IMAGE_INVALID' } as const;
const EMPTY_BODY = { expect: 'reject', status: 400, code: 'VALIDATION_FAILED' } as const;

/** The small real pictures every generated case starts from, one per accepted container. */
export interface BaseImages {
  jpeg: Buffer;
  progressive: Buffer;
  png: Buffer;
  webp: Buffer;
  webpLossless: Buffer;
  gif: Buffer;
  tiff: Buffer;
  avif: Buffer;
  progressiveCmyk: Buffer;
  progressive444: Buffer;
  progressiveGrey: Buffer;
}

export async function baseImages(): Promise<BaseImages> {
  const src = sharp(photoBytes('gps-DSCN0010.jpg')).resize(160);
  const [jpeg, progressive, png, webp, webpLossless, gif, tiff, avif, progressiveCmyk, progressive444, progressiveGrey] = await Promise.all([
    src.clone().jpeg().toBuffer(),
    src.clone().jpeg({ progressive: true }).toBuffer(),
    src.clone().png().toBuffer(),
    src.clone().webp().toBuffer(),
    src.clone().webp({ lossless: true }).withMetadata().toBuffer(), // extended (VP8X) WebP
    src.clone().gif().toBuffer(),
    src.clone().tiff().toBuffer(),
    src.clone().avif({ effort: 0 }).toBuffer(),
    src.clone().toColourspace('cmyk').jpeg({ progressive: true }).toBuffer(),
    src.clone().jpeg({ progressive: true, chromaSubsampling: '4:4:4' }).toBuffer(),
    src.clone().greyscale().jpeg({ progressive: true }).toBuffer(),
  ]);
  return { jpeg, progressive, png, webp, webpLossless, gif, tiff, avif, progressiveCmyk, progressive444, progressiveGrey };
}

export async function buildImageCorpus(size: CorpusSize, random: Prng): Promise<ImageCase[]> {
  const base = await baseImages();
  const cases: ImageCase[] = [];
  const add = (category: ImageCategory, name: string, bytes: Buffer, how: Pick<ImageCase, 'expect' | 'status' | 'code'>) =>
    cases.push({ category, name, base64: b64(bytes), ...how });

  // Over the 100 MP cap: refused from the header, before any pixel is decoded.
  const over: ImageCategory = 'bombs over the pixel cap';
  add(over, 'PNG 20000×20000 1-bit, real and decodable (49 KB)', solidPngBomb(20_000, 20_000), TOO_LARGE);
  add(over, 'PNG IHDR 65535×65535', C.pngWithDimensions(base.png, 65_535, 65_535), TOO_LARGE);
  add(over, 'PNG IHDR 2^31-1 square', C.pngWithDimensions(base.png, 0x7fffffff, 0x7fffffff), INVALID);
  add(over, 'JPEG SOF 65500×65500 (baseline)', C.jpegWithDimensions(base.jpeg, 65_500, 65_500), TOO_LARGE);
  add(over, 'JPEG SOF 65500×65500 (progressive)', C.jpegWithDimensions(base.progressive, 65_500, 65_500), TOO_LARGE);
  add(over, 'JPEG SOF 65535×65535 (CMYK progressive)', C.jpegWithDimensions(base.progressiveCmyk, 65_535, 65_535), { expect: 'reject', status: 422 });
  add(over, 'WebP VP8 frame 16383×16383', C.webpWithFrameSize(base.webp, 16_383, 16_383), TOO_LARGE);
  add(over, 'WebP VP8X canvas 16384×16384 over a 160 px frame', C.webpWithCanvas(base.webpLossless, 16_384, 16_384), { expect: 'reject', status: 422 });
  add(over, 'GIF screen and frame 65535×65535', C.gifWithDimensions(base.gif, 65_535, 65_535), { expect: 'reject', status: 422 });
  add(over, 'TIFF 4e9×4e9 header', C.tiffFile({ width: 4_000_000_000, height: 4_000_000_000, strip: Buffer.alloc(64) }), { expect: 'reject', status: 422 });
  add(over, 'TIFF 20000×20000 1-bit deflate, real (6 KB)', C.tiffFile({ width: 20_000, height: 20_000, bitsPerSample: 1, compression: 8, strip: deflateSync(Buffer.alloc(2_500 * 20_000), { level: 9 }) }), TOO_LARGE);
  add(over, 'AVIF ispe 65535×65535', C.avifWithExtents(base.avif, 65_535, 65_535), { expect: 'reject', status: 422 });
  add(over, 'HEIC (shared iPhone photo) ispe 60000×60000', heicDeclaring(photoBytes('heic-IMG_5195.HEIC'), 60_000, 60_000), TOO_LARGE);
  const bmp = await sharp(base.png).raw().toBuffer({ resolveWithObject: true }).then(({ data, info }) => bmpOf(data, info.width, info.height));
  add(over, 'BMP header 50000×50000', withBmpSize(bmp, 50_000, 50_000), TOO_LARGE);

  // Under the cap: small files that decode into up to 100 MP. Refused from the header as over
  // MAX_PIXELS_PER_BYTE (images/probe.ts): a few kilobytes claiming tens of megapixels.
  const under: ImageCategory = 'bombs under the pixel cap';
  // CI takes 4000-6000 px sides; the full run the 100 MP versions. Progressive JPEG and GIF have
  // no shrink-on-load: every coefficient (or pixel) is held at once, 0.7-1.6 GB at 100 MP.
  const big = size.heavyBombs ? 10_000 : 6_000;
  const side = size.heavyBombs ? 10_000 : 4_000;
  add(under, `PNG ${big}×${big - 1} 1-bit, real`, solidPngBomb(big, big - 1), TOO_LARGE);
  add(under, `TIFF ${big}×${big - 1} 8-bit deflate, real`, C.tiffFile({ width: big, height: big - 1, compression: 8, strip: deflateSync(Buffer.alloc(big * (big - 1)), { level: 9 }) }), TOO_LARGE);
  add(under, `JPEG baseline SOF ${big - 1}×${big - 1} over a 160 px scan`, C.jpegWithDimensions(base.jpeg, big - 1, big - 1), TOO_LARGE);
  add(under, 'PNG IHDR 1×99,000,000', C.pngWithDimensions(base.png, 1, 99_000_000), TOO_LARGE);
  add(under, `JPEG progressive greyscale SOF ${side}×${side}`, C.jpegWithDimensions(base.progressiveGrey, side, side), TOO_LARGE);
  // The decoder reads the 160 px of data actually there: a small picture, accepted.
  add(under, `GIF ${side - 1}×${side - 1} screen and frame over 160 px data`, C.gifWithDimensions(base.gif, side - 1, side - 1), { expect: 'accept' });
  if (size.heavyBombs) {
    add(under, 'JPEG progressive 4:2:0 SOF 10000×10000 (7 KB)', C.jpegWithDimensions(base.progressive, 10_000, 10_000), TOO_LARGE);
    add(under, 'JPEG progressive 4:4:4 SOF 10000×10000', C.jpegWithDimensions(base.progressive444, 10_000, 10_000), TOO_LARGE);
    add(under, 'JPEG progressive CMYK SOF 10000×10000 (22 KB)', C.jpegWithDimensions(base.progressiveCmyk, 10_000, 10_000), TOO_LARGE);
  }

  const nested: ImageCategory = 'nested and recursive structures';
  const tinyStrip = Buffer.alloc(16, 0x80);
  add(nested, 'TIFF IFD whose next IFD is itself', C.tiffFile({ width: 4, height: 4, strip: tinyStrip, next: 8 }), { expect: 'accept' });
  add(nested, 'TIFF SubIFD pointing at its own IFD', C.tiffFile({ width: 4, height: 4, strip: tinyStrip, subIfd: 8 }), { expect: 'accept' });
  add(nested, 'TIFF EXIF IFD pointing at its own IFD', C.tiffFile({ width: 4, height: 4, strip: tinyStrip, exifIfd: 8 }), { expect: 'accept' });
  add(nested, 'TIFF next IFD past the end of the file', C.tiffFile({ width: 4, height: 4, strip: tinyStrip, next: 0x7ffffff0 }), { expect: 'reject', status: 422 });
  add(nested, 'PNG zTXt inflating to 100 MB', C.pngInsertBeforeIdat(base.png, [C.compressedTextChunk('zTXt', 'Comment', 100_000_000)]), { expect: 'accept' });
  add(nested, 'PNG iCCP profile inflating to 100 MB', C.pngInsertBeforeIdat(base.png, [C.compressedTextChunk('iCCP', 'icc', 100_000_000)]), { expect: 'accept' });
  add(nested, 'APNG with 2^31-1 frames and a 65535² frame', C.pngInsertBeforeIdat(base.png, C.apngHostileControl(65_535, 65_535)), { expect: 'accept' });
  const thumbBomb = C.jpegWithDimensions(base.jpeg, 65_500, 65_500);
  add(nested, 'JPEG with a looping EXIF IFD and a 65500² thumbnail', C.jpegInsertSegment(base.jpeg, 0xe1, C.exifLoopWithThumbnail(thumbBomb.subarray(0, 60_000))), { expect: 'accept' });
  add(nested, 'JPEG with 2,000 empty COM segments', Buffer.concat([base.jpeg.subarray(0, 2), Buffer.concat(Array.from({ length: 2_000 }, () => Buffer.from([0xff, 0xfe, 0, 2]))), base.jpeg.subarray(2)]), { expect: 'accept' });
  add(nested, 'GIF with 10,000 frames', C.gifManyFrames(10_000), { expect: 'accept' });

  // Truncated at fixed and seeded offsets. A cut that only drops a trailer (PNG IEND, GIF ';')
  // or trailing metadata (the shared TIFF ends with its 323-byte XMP packet, after the IFD)
  // leaves a complete picture and may be accepted; every other cut must be refused.
  const fixedCuts = (n: number) => [1, 2, 8, 16, 64, Math.floor(n / 2), n - 16, n - 2, n - 1];
  const truncationBases: Array<[string, Buffer, number]> = [
    ['JPEG', base.jpeg, base.jpeg.length],
    ['progressive JPEG', base.progressive, base.progressive.length],
    ['PNG', base.png, base.png.length - 12],
    ['WebP', base.webp, base.webp.length],
    ['WebP lossless', base.webpLossless, base.webpLossless.length],
    ['GIF', base.gif, base.gif.length - 1],
    ['TIFF', base.tiff, base.tiff.length],
    ['AVIF', base.avif, base.avif.length],
    ['BMP', bmp, bmp.length],
    ['TIFF (shared tiff-Arbitro)', photoBytes('tiff-Arbitro.tiff'), photoBytes('tiff-Arbitro.tiff').length - 323],
  ];
  const trunc = random.fork('truncate');
  for (const [name, bytes, dataEnd] of truncationBases) {
    const cuts = new Set(fixedCuts(bytes.length));
    while (cuts.size < fixedCuts(bytes.length).length + size.truncationsPerFormat) cuts.add(trunc.range(1, bytes.length - 1));
    for (const cut of [...cuts].sort((a, b) => a - b)) {
      add('truncated files', `${name} cut at ${cut} of ${bytes.length}`, bytes.subarray(0, cut), cut < dataEnd ? { expect: 'reject', status: 422 } : { expect: 'either' });
    }
  }

  const shared = readdirSync(PHOTOS_DIR).filter((f) => f !== 'ATTRIBUTION').sort();
  for (const name of shared) {
    if (name.startsWith('invalid-')) add('shared invalid-* photos (intact)', name, photoBytes(name), { expect: 'accept' });
    else add('shared photos', name, photoBytes(name), { expect: 'accept' });
  }

  const mutants = random.fork('mutants');
  for (let i = 0; i < size.mutants; i++) {
    const name = shared[i % shared.length]!;
    const m = mutate(photoBytes(name), mutants);
    add('byte mutants of the shared photos', `#${i} ${name}: ${m.recipe}`, m.bytes, { expect: 'either' });
  }

  const tiny: ImageCategory = 'empty and tiny';
  cases.push({ category: tiny, name: 'empty string', base64: '', ...EMPTY_BODY });
  cases.push({ category: tiny, name: 'data URI with no data', base64: 'data:image/png;base64,', ...EMPTY_BODY });
  cases.push({ category: tiny, name: 'only padding', base64: '====', ...EMPTY_BODY });
  cases.push({ category: tiny, name: 'data URI of text/html', base64: `data:text/html;base64,${b64(Buffer.from('<b>x</b>'))}`, ...EMPTY_BODY });
  add(tiny, '1 byte 0x00', Buffer.from([0]), INVALID);
  add(tiny, '1 byte 0xFF', Buffer.from([0xff]), INVALID);
  add(tiny, 'JPEG SOI only', Buffer.from([0xff, 0xd8]), INVALID);
  add(tiny, 'JPEG SOI + marker byte', Buffer.from([0xff, 0xd8, 0xff]), INVALID);
  add(tiny, 'PNG signature only', base.png.subarray(0, 8), INVALID);
  add(tiny, 'GIF89a only', Buffer.from('GIF89a'), INVALID);
  add(tiny, 'RIFF WEBP header only', base.webp.subarray(0, 12), INVALID);
  add(tiny, '1×1 PNG, the smallest real picture', await sharp({ create: { width: 1, height: 1, channels: 3, background: '#fff' } }).png().toBuffer(), { expect: 'accept' });

  const mask: ImageCategory = 'masquerading files';
  const text = (s: string) => Buffer.from(s, 'utf8');
  const masquerades: Array<[string, Buffer]> = [
    ['plain text', text('just some text, not a photo')],
    ['HTML', text('<!DOCTYPE html><html><body><img src=x onerror=alert(1)></body></html>')],
    ['SVG 100000×100000', text('<svg xmlns="http://www.w3.org/2000/svg" width="100000" height="100000"><rect width="100%" height="100%"/></svg>')],
    ['SVG with an external entity (XXE)', text('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>')],
    ['SVG billion laughs', text(`<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa">${Array.from({ length: 9 }, (_, i) => `<!ENTITY ${String.fromCharCode(98 + i)} "${`&${String.fromCharCode(97 + i)};`.repeat(10)}">`).join('')}]><svg xmlns="http://www.w3.org/2000/svg"><text>&j;</text></svg>`)],
    ['PDF', text('%PDF-1.7\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n')],
    ['ZIP', Buffer.concat([text('PK\x03\x04'), Buffer.alloc(26), text('PK\x05\x06'), Buffer.alloc(18)])],
    ['gzip of a PNG', Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]), deflateSync(base.png, { level: 1 })])],
    ['JPEG SOI followed by HTML (polyglot)', Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), text('<html><script>alert(1)</script></html>')])],
    ['PNG signature followed by HTML', Buffer.concat([base.png.subarray(0, 8), text('<html><script>alert(1)</script></html>')])],
    ['GIF89a JavaScript polyglot', text('GIF89a=1;alert(document.domain);//')],
    ['RIFF WEBP with garbage', Buffer.concat([base.webp.subarray(0, 12), Buffer.alloc(256, 0x41)])],
    ['TIFF header with garbage', Buffer.concat([Buffer.from('II*\0', 'latin1'), Buffer.alloc(256, 0xee)])],
    ['AVIF ftyp with garbage', Buffer.concat([base.avif.subarray(0, 32), Buffer.alloc(256, 0x41)])],
    ['HEIC ftyp with garbage', Buffer.concat([photoBytes('heic-IMG_5195.HEIC').subarray(0, 32), Buffer.alloc(256, 0x41)])],
    ['"BM" with no DIB header', Buffer.concat([text('BM'), Buffer.alloc(52)])],
    ['ICO', Buffer.from([0, 0, 1, 0, 1, 0, 16, 16, 0, 0, 1, 0, 32, 0, 0, 0, 0, 0, 22, 0, 0, 0])],
    ['PSD', Buffer.concat([text('8BPS'), Buffer.alloc(64)])],
    ['PPM (libvips can read it; must never reach it)', Buffer.concat([text('P6\n2 2\n255\n'), Buffer.alloc(12, 0x7f)])],
    ['PFM', Buffer.concat([text('PF\n1 1\n-1.0\n'), Buffer.alloc(12)])],
    ['libvips native .v header', Buffer.concat([Buffer.from([0x08, 0xf2, 0xa6, 0xb6]), Buffer.alloc(60)])],
    ['FITS', text(`${'SIMPLE  =                    T'.padEnd(80)}${'END'.padEnd(80)}`)],
    ['libvips matrix text', text('2 2\n1 2\n3 4\n')],
    ['CSV', text('1,2,3\n4,5,6\n')],
    ['JPEG 2000', Buffer.concat([Buffer.from([0, 0, 0, 0x0c, 0x6a, 0x50, 0x20, 0x20, 0x0d, 0x0a, 0x87, 0x0a]), Buffer.alloc(64)])],
    ['JPEG XL', Buffer.concat([Buffer.from([0xff, 0x0a]), Buffer.alloc(64)])],
    ['OpenEXR', Buffer.concat([Buffer.from([0x76, 0x2f, 0x31, 0x01]), Buffer.alloc(64)])],
    ['ELF executable', Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]), Buffer.alloc(64)])],
  ];
  for (const [name, bytes] of masquerades) add(mask, name, bytes, INVALID);
  return cases;
}

function withBmpSize(bmp: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(bmp);
  out.writeInt32LE(width, 18);
  out.writeInt32LE(height, 22);
  return out;
}
