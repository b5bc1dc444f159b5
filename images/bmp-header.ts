import { imageInvalid } from '../core/errors.ts';

/**
 * Reads a BMP's size from its headers (sharp/libvips cannot read BMP at all), and where its pixels
 * end: an uncompressed BMP cut short would decode with black rows, so images/open.ts refuses it
 * before decoding. RLE-compressed BMPs are checked by their decoder.
 */

export interface BmpHeader {
  width: number;
  height: number;
  /** Byte offset where the uncompressed pixel rows end; undefined for RLE. */
  pixelsEnd?: number;
}

const BI_RGB = 0;
const BI_RLE8 = 1;
const BI_RLE4 = 2;
const BI_BITFIELDS = 3;
const BI_ALPHABITFIELDS = 6;
const DEPTHS = new Set([1, 4, 8, 16, 24, 32]);

export function readBmpHeader(b: Buffer): BmpHeader {
  if (b.length < 54) throw imageInvalid('BMP header is truncated');
  const offset = b.readUInt32LE(10);
  const width = b.readInt32LE(18);
  const rawHeight = b.readInt32LE(22); // negative: rows stored top-down
  const planes = b.readUInt16LE(26);
  const depth = b.readUInt16LE(28);
  const compression = b.readUInt32LE(30);
  const height = Math.abs(rawHeight);
  if (!(width > 0 && height > 0) || planes !== 1) throw imageInvalid('BMP header has no valid dimensions');
  if (!DEPTHS.has(depth)) throw imageInvalid(`BMP with ${depth} bits per pixel is not supported`);
  const rle = compression === BI_RLE8 || compression === BI_RLE4;
  if (![BI_RGB, BI_BITFIELDS, BI_ALPHABITFIELDS].includes(compression) && !rle) {
    throw imageInvalid(`BMP compression ${compression} (embedded JPEG/PNG or other) is not supported`);
  }
  if (rle && rawHeight < 0) throw imageInvalid('BMP with RLE compression cannot be top-down');
  if (rle) return { width, height };
  return { width, height, pixelsEnd: offset + Math.ceil((width * depth) / 32) * 4 * height };
}
