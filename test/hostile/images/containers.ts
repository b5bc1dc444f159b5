import { crc32, deflateSync } from 'node:zlib';

/**
 * Byte-level writers and patchers for the image containers the hostile image corpus abuses. Each
 * works on a real file sharp produced and changes only what the attack needs, so the rest of the
 * file stays well-formed and the parser reaches the part under test.
 */

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

interface PngChunk {
  type: string;
  data: Buffer;
}

export function pngChunks(png: Buffer): PngChunk[] {
  if (!png.subarray(0, 8).equals(PNG_SIGNATURE)) throw new Error('not a PNG');
  const out: PngChunk[] = [];
  for (let at = 8; at + 12 <= png.length; ) {
    const len = png.readUInt32BE(at);
    out.push({ type: png.toString('latin1', at + 4, at + 8), data: png.subarray(at + 8, at + 8 + len) });
    at += 12 + len;
  }
  return out;
}

export function pngFrom(chunks: PngChunk[]): Buffer {
  return Buffer.concat([PNG_SIGNATURE, ...chunks.map((c) => pngChunk(c.type, c.data))]);
}

/** A PNG whose IHDR declares width × height over its real (small) pixel data, CRC fixed up. */
export function pngWithDimensions(png: Buffer, width: number, height: number): Buffer {
  return pngFrom(
    pngChunks(png).map((c) => {
      if (c.type !== 'IHDR') return c;
      const data = Buffer.from(c.data);
      data.writeUInt32BE(width >>> 0, 0);
      data.writeUInt32BE(height >>> 0, 4);
      return { type: c.type, data };
    }),
  );
}

/** Inserts chunks just before IDAT (ancillary chunks a decoder must read or skip on the way). */
export function pngInsertBeforeIdat(png: Buffer, extra: PngChunk[]): Buffer {
  const chunks = pngChunks(png);
  const idat = chunks.findIndex((c) => c.type === 'IDAT');
  return pngFrom([...chunks.slice(0, idat), ...extra, ...chunks.slice(idat)]);
}

/** zTXt (or iCCP) payload: keyword, NUL, method 0, deflate of `inflated` zero bytes. */
export function compressedTextChunk(type: 'zTXt' | 'iCCP', keyword: string, inflated: number): PngChunk {
  const body = deflateSync(Buffer.alloc(inflated), { level: 9 });
  return { type, data: Buffer.concat([Buffer.from(keyword, 'latin1'), Buffer.from([0, 0]), body]) };
}

/**
 * An animated PNG control chunk declaring an absurd number of frames, with a frame control chunk
 * declaring a frame larger than the canvas: APNG readers must not trust either.
 */
export function apngHostileControl(width: number, height: number): PngChunk[] {
  const actl = Buffer.alloc(8);
  actl.writeUInt32BE(0x7fffffff, 0); // num_frames
  actl.writeUInt32BE(0, 4); // num_plays: forever
  const fctl = Buffer.alloc(26);
  fctl.writeUInt32BE(0, 0); // sequence
  fctl.writeUInt32BE(width, 4);
  fctl.writeUInt32BE(height, 8);
  return [
    { type: 'acTL', data: actl },
    { type: 'fcTL', data: fctl },
  ];
}

// ---------------------------------------------------------------------------------------------
// JPEG

/** Offsets of every marker segment before the first SOS (type byte, segment start). */
export function jpegSegments(jpeg: Buffer): Array<{ marker: number; at: number; length: number }> {
  const out: Array<{ marker: number; at: number; length: number }> = [];
  let at = 2;
  while (at + 4 <= jpeg.length && jpeg[at] === 0xff) {
    const marker = jpeg[at + 1]!;
    const length = jpeg.readUInt16BE(at + 2);
    out.push({ marker, at, length });
    if (marker === 0xda) break; // entropy-coded data follows
    at += 2 + length;
  }
  return out;
}

const SOF_MARKERS = new Set([0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf]);

/** A JPEG whose frame header (SOF) declares width × height (each at most 65,535). */
export function jpegWithDimensions(jpeg: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(jpeg);
  const sof = jpegSegments(out).find((s) => SOF_MARKERS.has(s.marker));
  if (!sof) throw new Error('no SOF segment');
  out.writeUInt16BE(height, sof.at + 5);
  out.writeUInt16BE(width, sof.at + 7);
  return out;
}

/** Inserts an APPn segment right after SOI. */
export function jpegInsertSegment(jpeg: Buffer, marker: number, payload: Buffer): Buffer {
  if (payload.length + 2 > 0xffff) throw new Error('segment too long');
  const head = Buffer.from([0xff, marker, 0, 0]);
  head.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([jpeg.subarray(0, 2), head, payload, jpeg.subarray(2)]);
}

// ---------------------------------------------------------------------------------------------
// TIFF (little-endian classic), written by hand so IFD links can point anywhere.

export interface TiffEntry {
  tag: number;
  type: 3 | 4; // SHORT, LONG
  values: number[];
}

const TAG = {
  ImageWidth: 256,
  ImageLength: 257,
  BitsPerSample: 258,
  Compression: 259,
  Photometric: 262,
  StripOffsets: 273,
  SamplesPerPixel: 277,
  RowsPerStrip: 278,
  StripByteCounts: 279,
  SubIFDs: 330,
  ExifIFD: 34665,
} as const;

/**
 * One IFD at offset 8 followed by the strip data. `next` is the next-IFD offset to write
 * (8 = itself: a loop), `subIfd` adds a SubIFDs entry pointing at the given offset.
 */
export function tiffFile(opts: {
  width: number;
  height: number;
  strip: Buffer;
  compression?: number;
  bitsPerSample?: number;
  rowsPerStrip?: number;
  next?: number;
  subIfd?: number;
  exifIfd?: number;
}): Buffer {
  const entries: TiffEntry[] = [
    { tag: TAG.ImageWidth, type: 4, values: [opts.width] },
    { tag: TAG.ImageLength, type: 4, values: [opts.height] },
    { tag: TAG.BitsPerSample, type: 3, values: [opts.bitsPerSample ?? 8] },
    { tag: TAG.Compression, type: 3, values: [opts.compression ?? 1] },
    { tag: TAG.Photometric, type: 3, values: [1] }, // black is zero
    { tag: TAG.StripOffsets, type: 4, values: [0] }, // patched below
    { tag: TAG.SamplesPerPixel, type: 3, values: [1] },
    { tag: TAG.RowsPerStrip, type: 4, values: [opts.rowsPerStrip ?? opts.height] },
    { tag: TAG.StripByteCounts, type: 4, values: [opts.strip.length] },
  ];
  if (opts.subIfd !== undefined) entries.push({ tag: TAG.SubIFDs, type: 4, values: [opts.subIfd] });
  if (opts.exifIfd !== undefined) entries.push({ tag: TAG.ExifIFD, type: 4, values: [opts.exifIfd] });
  entries.sort((a, b) => a.tag - b.tag);
  const ifdSize = 2 + entries.length * 12 + 4;
  const stripAt = 8 + ifdSize;
  const out = Buffer.alloc(stripAt + opts.strip.length);
  out.write('II', 0, 'latin1');
  out.writeUInt16LE(42, 2);
  out.writeUInt32LE(8, 4);
  out.writeUInt16LE(entries.length, 8);
  entries.forEach((e, i) => {
    const at = 10 + i * 12;
    out.writeUInt16LE(e.tag, at);
    out.writeUInt16LE(e.type, at + 2);
    out.writeUInt32LE(1, at + 4);
    const value = e.tag === TAG.StripOffsets ? stripAt : e.values[0]!;
    if (e.type === 3) out.writeUInt16LE(value, at + 8);
    else out.writeUInt32LE(value >>> 0, at + 8);
  });
  out.writeUInt32LE(opts.next ?? 0, 10 + entries.length * 12);
  opts.strip.copy(out, stripAt);
  return out;
}

// ---------------------------------------------------------------------------------------------
// WebP

/** A WebP whose VP8X canvas declares width × height (1…16,777,216 each), RIFF size kept. */
export function webpWithCanvas(webp: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(webp);
  if (out.toString('latin1', 12, 16) !== 'VP8X') throw new Error('not an extended WebP');
  out.writeUIntLE(width - 1, 24, 3);
  out.writeUIntLE(height - 1, 27, 3);
  return out;
}

/** A simple (lossy VP8) WebP whose frame header declares width × height (14 bits each). */
export function webpWithFrameSize(webp: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(webp);
  if (out.toString('latin1', 12, 16) !== 'VP8 ') throw new Error('not a simple lossy WebP');
  // VP8 chunk data at 20: 3-byte frame tag, 3-byte start code, then 14-bit width and height.
  out.writeUInt16LE((out.readUInt16LE(26) & 0xc000) | (width & 0x3fff), 26);
  out.writeUInt16LE((out.readUInt16LE(28) & 0xc000) | (height & 0x3fff), 28);
  return out;
}

// ---------------------------------------------------------------------------------------------
// GIF

/** Offset of the first image descriptor (0x2C), walking past the colour table and extensions. */
export function gifFirstDescriptor(gif: Buffer): number {
  const packed = gif[10]!;
  let at = 13 + (packed & 0x80 ? 3 * (1 << ((packed & 0x07) + 1)) : 0);
  while (at < gif.length && gif[at] === 0x21) {
    at += 2; // introducer, label
    while (at < gif.length && gif[at] !== 0) at += gif[at]! + 1; // data sub-blocks
    at += 1; // block terminator
  }
  if (gif[at] !== 0x2c) throw new Error('no image descriptor');
  return at;
}

/** A GIF whose logical screen and first image descriptor both declare width × height. */
export function gifWithDimensions(gif: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(gif);
  out.writeUInt16LE(width, 6);
  out.writeUInt16LE(height, 8);
  const descriptor = gifFirstDescriptor(out);
  out.writeUInt16LE(width, descriptor + 5);
  out.writeUInt16LE(height, descriptor + 7);
  return out;
}

/**
 * A GIF89a of `frames` 1×1 frames (each a graphic control extension and a minimal image): sharp
 * reads only the first, but a header read that counts pages walks all of them.
 */
export function gifManyFrames(frames: number): Buffer {
  const header = Buffer.from('GIF89a', 'latin1');
  const screen = Buffer.from([1, 0, 1, 0, 0x80, 0, 0]); // 1×1, global table of 2 colours
  const palette = Buffer.from([0, 0, 0, 255, 255, 255]);
  const frame = Buffer.from([
    0x21, 0xf9, 4, 0, 1, 0, 0, 0, // graphic control: 1/100 s
    0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, // image descriptor 1×1
    2, 2, 0x44, 0x01, 0, // LZW min code size 2, one sub-block: clear, 0, end
  ]);
  return Buffer.concat([header, screen, palette, Buffer.concat(Array.from({ length: frames }, () => frame)), Buffer.from([0x3b])]);
}

// ---------------------------------------------------------------------------------------------
// AVIF / HEIF

/** An AVIF whose image spatial extents (every `ispe` property) declare width × height. */
export function avifWithExtents(avif: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(avif);
  let found = 0;
  for (let at = out.indexOf('ispe', 0, 'latin1'); at >= 0; at = out.indexOf('ispe', at + 4, 'latin1')) {
    // box: size(4) 'ispe'(4) version/flags(4) width(4) height(4)
    out.writeUInt32BE(width >>> 0, at + 8);
    out.writeUInt32BE(height >>> 0, at + 12);
    found += 1;
  }
  if (found === 0) throw new Error('no ispe box');
  return out;
}

// ---------------------------------------------------------------------------------------------
// EXIF (inside a JPEG APP1)

/**
 * An APP1 EXIF payload whose IFD0 links to itself as the next IFD (a loop), and whose IFD1
 * would carry a thumbnail: `thumbnail` is stored as the JPEG interchange data of IFD0 itself.
 */
export function exifLoopWithThumbnail(thumbnail: Buffer): Buffer {
  const tiff = Buffer.alloc(8 + 2 + 3 * 12 + 4);
  tiff.write('II', 0, 'latin1');
  tiff.writeUInt16LE(42, 2);
  tiff.writeUInt32LE(8, 4);
  tiff.writeUInt16LE(3, 8);
  const entry = (i: number, tag: number, type: number, value: number) => {
    const at = 10 + i * 12;
    tiff.writeUInt16LE(tag, at);
    tiff.writeUInt16LE(type, at + 2);
    tiff.writeUInt32LE(1, at + 4);
    tiff.writeUInt32LE(value, at + 8);
  };
  const thumbAt = tiff.length;
  entry(0, 0x0112, 3, 1); // Orientation
  entry(1, 0x0201, 4, thumbAt); // JPEGInterchangeFormat
  entry(2, 0x0202, 4, thumbnail.length); // JPEGInterchangeFormatLength
  tiff.writeUInt32LE(8, 10 + 3 * 12); // next IFD: IFD0 again
  return Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff, thumbnail]);
}
