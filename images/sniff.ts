/**
 * Recognises our accepted containers by their magic bytes, before any decoder sees the data,
 * so formats libvips could also parse (SVG, PDF, its own .v format, FITS…) never reach a parser.
 */

export type Container = 'jpeg' | 'png' | 'webp' | 'gif' | 'tiff' | 'isobmff' | 'bmp';

/** DIB header sizes after the 14-byte BMP file header that bmp-ts decodes (BITMAPINFOHEADER…V5). */
const BMP_INFO_HEADERS = new Set([40, 52, 56, 108, 124]);

// ISOBMFF brands of still AVIF/HEIF images (ISO/IEC 23008-12, AV1 image file format).
const IMAGE_BRANDS = new Set(['avif', 'avis', 'heic', 'heix', 'heim', 'heis', 'hevc', 'hevx', 'mif1', 'msf1']);

const startsWith = (b: Buffer, sig: number[], at = 0) => sig.every((v, i) => b[at + i] === v);
const ascii = (b: Buffer, from: number, to: number) => b.toString('latin1', from, to);

export function sniffContainer(b: Buffer): Container | null {
  if (startsWith(b, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (startsWith(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'png';
  if (ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WEBP') return 'webp';
  if (ascii(b, 0, 6) === 'GIF87a' || ascii(b, 0, 6) === 'GIF89a') return 'gif';
  // Classic TIFF (42) and BigTIFF (43), both byte orders.
  if (startsWith(b, [0x49, 0x49, 0x2a, 0x00]) || startsWith(b, [0x4d, 0x4d, 0x00, 0x2a])) return 'tiff';
  if (startsWith(b, [0x49, 0x49, 0x2b, 0x00]) || startsWith(b, [0x4d, 0x4d, 0x00, 0x2b])) return 'tiff';
  // "BM" alone is two letters of text: the DIB header size behind it must be one we decode.
  if (ascii(b, 0, 2) === 'BM' && b.length >= 18 && BMP_INFO_HEADERS.has(b.readUInt32LE(14))) return 'bmp';
  if (b.length >= 16 && ascii(b, 4, 8) === 'ftyp') {
    const boxSize = Math.min(b.readUInt32BE(0), b.length, 256);
    for (let at = 8; at + 4 <= boxSize; at += at === 8 ? 8 : 4) {
      if (IMAGE_BRANDS.has(ascii(b, at, at + 4))) return 'isobmff';
    }
  }
  return null;
}
