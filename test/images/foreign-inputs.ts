/**
 * Hand-made HEIC and BMP inputs for tests, written without the libraries that decode them.
 */

/** A 24-bit uncompressed BMP (BITMAPINFOHEADER) of interleaved RGB pixels. */
export function bmpOf(rgb: Buffer, width: number, height: number, opts: { topDown?: boolean } = {}): Buffer {
  const rowBytes = Math.ceil((width * 3) / 4) * 4;
  const out = Buffer.alloc(54 + rowBytes * height);
  out.write('BM', 0, 'latin1');
  out.writeUInt32LE(out.length, 2);
  out.writeUInt32LE(54, 10);
  out.writeUInt32LE(40, 14);
  out.writeInt32LE(width, 18);
  out.writeInt32LE(opts.topDown ? -height : height, 22);
  out.writeUInt16LE(1, 26);
  out.writeUInt16LE(24, 28);
  out.writeUInt32LE(rowBytes * height, 34);
  for (let y = 0; y < height; y++) {
    const row = 54 + (opts.topDown ? y : height - 1 - y) * rowBytes;
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      out[row + x * 3] = rgb[i + 2]!; // stored B, G, R
      out[row + x * 3 + 1] = rgb[i + 1]!;
      out[row + x * 3 + 2] = rgb[i]!;
    }
  }
  return out;
}

/**
 * A copy of a HEIC whose image-size property (ispe) of the primary image declares another size:
 * the header then claims what an attacker wants, whatever the coded data holds.
 */
export function heicDeclaring(heic: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(heic);
  let patched = 0;
  for (let at = out.indexOf('ispe'); at >= 0; at = out.indexOf('ispe', at + 4)) {
    // box: size(4) 'ispe'(4) version+flags(4) width(4) height(4); tiles are 512×512.
    if (out.readUInt32BE(at + 8) === 512 && out.readUInt32BE(at + 12) === 512) continue;
    out.writeUInt32BE(width, at + 8);
    out.writeUInt32BE(height, at + 12);
    patched += 1;
  }
  if (patched !== 1) throw new Error(`expected one primary ispe box, patched ${patched}`);
  return out;
}

export interface BmpVariant {
  depth: 1 | 4 | 8 | 16 | 24 | 32;
  /** BI_RGB (0), BI_RLE8 (1), BI_RLE4 (2), BI_BITFIELDS (3). */
  compression?: 0 | 1 | 2 | 3;
  /** DIB header size: 40 (BITMAPINFOHEADER), 108 (V4) or 124 (V5). */
  headerSize?: 40 | 108 | 124;
  /** Red, green, blue (and alpha) masks, for BI_BITFIELDS or inside a V4/V5 header. */
  masks?: [number, number, number, number?];
  /** Palette entries (RGB), for depth ≤ 8; written as biClrUsed entries unless clrUsed says otherwise. */
  palette?: Array<[number, number, number]>;
  /** biClrUsed as written in the header (default: the palette's length, or 0). */
  clrUsed?: number;
  /** Bytes between the header (and palette) and the pixel rows. */
  gap?: number;
  /** Stored pixel rows (bottom-up), without the file's headers: what the depth and compression hold. */
  rows: Buffer;
}

/**
 * A BMP of any depth and compression from rows the caller packed itself (so a test states the
 * exact bytes a decoder must interpret): file header, DIB header, masks, palette, optional gap, rows.
 */
export function bmpVariant(width: number, height: number, v: BmpVariant): Buffer {
  const headerSize = v.headerSize ?? 40;
  const compression = v.compression ?? 0;
  const masks = v.masks ?? [0, 0, 0, 0];
  const separateMasks = headerSize === 40 && compression === 3 ? 12 : 0;
  const palette = v.palette ?? [];
  const pixelOffset = 14 + headerSize + separateMasks + palette.length * 4 + (v.gap ?? 0);
  const out = Buffer.alloc(pixelOffset + v.rows.length);
  out.write('BM', 0, 'latin1');
  out.writeUInt32LE(out.length, 2);
  out.writeUInt32LE(pixelOffset, 10);
  out.writeUInt32LE(headerSize, 14);
  out.writeInt32LE(width, 18);
  out.writeInt32LE(height, 22);
  out.writeUInt16LE(1, 26);
  out.writeUInt16LE(v.depth, 28);
  out.writeUInt32LE(compression, 30);
  out.writeUInt32LE(v.rows.length, 34);
  out.writeUInt32LE(v.clrUsed ?? palette.length, 46);
  if (headerSize > 40 || separateMasks) {
    for (let i = 0; i < (headerSize > 40 ? 4 : 3); i++) out.writeUInt32LE((masks[i] ?? 0) >>> 0, 54 + i * 4);
  }
  if (headerSize > 40) out.write('BGRs', 70, 'latin1'); // bV4CSType: sRGB
  palette.forEach(([r, g, b], i) => out.set([b, g, r, 0], 14 + headerSize + separateMasks + i * 4));
  v.rows.copy(out, pixelOffset);
  return out;
}

/** Rows of `width` pixels, each pixel packed by `pixel` into `bytesPerPixel` little-endian bytes, padded to 4 bytes. */
export function packRows(width: number, height: number, bytesPerPixel: 2 | 3 | 4, pixel: (x: number, y: number) => number): Buffer {
  const rowBytes = Math.ceil((width * bytesPerPixel) / 4) * 4;
  const rows = Buffer.alloc(rowBytes * height);
  for (let y = 0; y < height; y++) {
    const at = (height - 1 - y) * rowBytes; // bottom-up
    for (let x = 0; x < width; x++) rows.writeUIntLE(pixel(x, y) >>> 0, at + x * bytesPerPixel, bytesPerPixel);
  }
  return rows;
}
