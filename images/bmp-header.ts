import { imageInvalid } from '../core/errors.ts';

/**
 * Reads a BMP's headers (sharp/libvips cannot read BMP at all) and accepts only the variants
 * bmp-ts decodes correctly, each verified pixel for pixel on hand-built files
 * (test/images/foreign-formats.test.ts): 24-bit, 32-bit and 16-bit, uncompressed or with bit
 * masks (BI_BITFIELDS). bmp-ts 1.0.9 gets the others wrong (palette depths ignore toRGBA and
 * write A,B,G,R; RLE writes every channel into one byte; 1-bit zeroes earlier pixels' blue), so
 * they are refused by name rather than fingerprinted and billed as wrong pixels
 * (docs/decisions.md, "Accepted formats").
 *
 * Everything bmp-ts would trust is checked here first: the palette size (it builds one object per
 * declared colour), where the pixel rows start and that they fit in the file (an uncompressed BMP
 * cut short would decode with black rows).
 */

export interface BmpHeader {
  width: number;
  height: number;
  /** Byte offset where the pixel rows end. */
  pixelsEnd: number;
}

const BI_RGB = 0;
const BI_RLE8 = 1;
const BI_RLE4 = 2;
const BI_BITFIELDS = 3;
const BI_ALPHABITFIELDS = 6;
/** What a BMP palette can hold at any depth (≤ 8 bits per index; an optional table above that). */
const MAX_PALETTE = 256;
/** The masks BI_RGB means (bmp-ts' defaults), by depth. */
const BI_RGB_MASKS: Record<number, readonly [number, number, number, number]> = {
  16: [0x7c00, 0x03e0, 0x001f, 0],
  32: [0x00ff0000, 0x0000ff00, 0x000000ff, 0],
};

export function readBmpHeader(b: Buffer): BmpHeader {
  return parse(b).header;
}

/**
 * The bytes to hand bmp-ts: it reads the pixel rows from the end of its headers and palette (not
 * from bfOffBits), and takes a V4/V5 header's mask fields even for BI_RGB. When a BMP's rows start
 * later, or its BI_RGB header carries other masks, a copy is returned that says what the file means.
 */
export function bmpForDecoder(b: Buffer): Buffer {
  const { layout } = parse(b);
  if (layout.offset === layout.decoderStart && !layout.fixMasks) return b;
  const out = Buffer.concat([b.subarray(0, layout.decoderStart), b.subarray(layout.offset)]);
  if (layout.fixMasks) layout.fixMasks.forEach((m, i) => out.writeUInt32LE(m >>> 0, 54 + i * 4));
  return out;
}

interface Layout {
  offset: number;
  decoderStart: number;
  fixMasks?: readonly number[];
}

function parse(b: Buffer): { header: BmpHeader; layout: Layout } {
  if (b.length < 54) throw imageInvalid('BMP header is truncated');
  const offset = b.readUInt32LE(10);
  const headerSize = b.readUInt32LE(14);
  const width = b.readInt32LE(18);
  const rawHeight = b.readInt32LE(22); // negative: rows stored top-down
  const planes = b.readUInt16LE(26);
  const depth = b.readUInt16LE(28);
  const compression = b.readUInt32LE(30);
  const colours = b.readUInt32LE(46);
  const height = Math.abs(rawHeight);
  // BITMAPINFOHEADER and its successors (V2, V3, V4, V5); the OS/2 headers lay fields out otherwise.
  if (![40, 52, 56, 108, 124].includes(headerSize)) throw imageInvalid(`BMP with a ${headerSize}-byte header (OS/2 or unknown) is not supported; convert to PNG`);
  if (!(width > 0 && height > 0) || planes !== 1) throw imageInvalid('BMP header has no valid dimensions');
  if (compression === BI_RLE8 || compression === BI_RLE4) {
    throw imageInvalid(`${compression === BI_RLE8 ? 'RLE8' : 'RLE4'}-compressed BMP is not supported; convert to PNG`);
  }
  if (depth === 1 || depth === 4 || depth === 8) throw imageInvalid(`${depth}-bit palette BMP is not supported; convert to PNG`);
  if (depth !== 16 && depth !== 24 && depth !== 32) throw imageInvalid(`BMP with ${depth} bits per pixel is not supported`);
  const bitfields = compression === BI_BITFIELDS || compression === BI_ALPHABITFIELDS;
  if (compression !== BI_RGB && !bitfields) throw imageInvalid(`BMP compression ${compression} (embedded JPEG/PNG or other) is not supported`);
  if (bitfields && depth === 24) throw imageInvalid('24-bit BMP with bit masks is not supported; convert to PNG');
  if (colours > MAX_PALETTE) throw imageInvalid(`BMP declares ${colours} palette colours (at most ${MAX_PALETTE} exist)`);

  // Where bmp-ts starts reading pixel rows: after the 14-byte file header and the DIB header's
  // fields (masks after a 40-byte header when compression says so), then the palette it reads.
  let decoderStart = 54;
  const masksAt = decoderStart;
  if (headerSize > 40 || bitfields) decoderStart += 12;
  if (headerSize > 52 || compression === BI_ALPHABITFIELDS) decoderStart += 4;
  if (headerSize > 56) decoderStart += 108 - 56;
  if (headerSize > 108) decoderStart += 124 - 108;
  const masksEnd = decoderStart;
  decoderStart += colours * 4;
  if (decoderStart > b.length) throw imageInvalid('BMP header is truncated');
  if (offset < decoderStart) throw imageInvalid(`BMP declares its pixel data at byte ${offset}, before the end of its headers and palette (byte ${decoderStart})`);
  if (offset >= b.length) throw imageInvalid(`BMP declares its pixel data at byte ${offset}, past the end of its ${b.length} bytes`);

  let fixMasks: readonly number[] | undefined;
  if (bitfields) {
    const [red, green, blue] = [0, 1, 2].map((i) => b.readUInt32LE(masksAt + i * 4));
    for (const [name, mask] of [['red', red!], ['green', green!], ['blue', blue!]] as const) {
      if (!contiguous(mask) || mask >= 2 ** depth) throw imageInvalid(`BMP ${name} mask 0x${mask.toString(16)} is not a run of bits within ${depth} bits`);
    }
  } else if (headerSize > 40 && depth !== 24) {
    // BI_RGB means the default masks; bmp-ts would use whatever the V4/V5 header's fields hold.
    const declared = Array.from({ length: (masksEnd - masksAt) / 4 }, (_, i) => b.readUInt32LE(masksAt + i * 4)).slice(0, 4);
    const defaults = BI_RGB_MASKS[depth]!;
    if (declared.some((m, i) => m !== defaults[i])) fixMasks = defaults.slice(0, declared.length);
  }

  const pixelsEnd = offset + Math.ceil((width * depth) / 32) * 4 * height;
  return { header: { width, height, pixelsEnd }, layout: { offset, decoderStart, ...(fixMasks ? { fixMasks } : {}) } };
}

/** One run of set bits (0b0111_1000), not zero and without holes. */
function contiguous(mask: number): boolean {
  if (mask === 0) return false;
  const shifted = mask / ((mask & -mask) >>> 0);
  return Number.isInteger(Math.log2(shifted + 1));
}
