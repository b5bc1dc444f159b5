import sharp from 'sharp';
import { AppError, corruptImage } from '../core/errors.ts';
import { openImage, readHeader } from './open.ts';

/**
 * The pixel work behind vendor uploads (vendors/resize.ts decides the sizes): the upright size of
 * an original, its one decode into raw pixels, and the JPEG an upload is encoded as. Metadata
 * (EXIF, GPS, XMP) never reaches an upload: the vendor gets pixels only.
 */

export interface Size {
  width: number;
  height: number;
}

/** Raw 8-bit sRGB pixels, 3 channels, row-major: width × height × 3 bytes. */
export interface RawPixels extends Size {
  pixels: Buffer;
}

const invalid = (e: unknown): AppError => corruptImage(e);

/** Decoded size after EXIF auto-orientation (what a viewer shows). */
export async function uprightSize(input: Buffer): Promise<Size> {
  try {
    const { width, height } = (await readHeader(input)).upright;
    if (!width || !height) throw new Error('no dimensions');
    return { width, height };
  } catch (e) {
    throw invalid(e);
  }
}

/**
 * Decode `input` upright, on white, shrunk to `size` (its upright size is `source`): raw pixels.
 * `maxPixels`: the configured IMAGE_MAX_PIXELS, which the HEIC/BMP decoder enforces as it decodes.
 */
export async function decodeRaw(input: Buffer, source: Size, size: Size, maxPixels: number): Promise<RawPixels> {
  try {
    let pipeline = (await openImage(input, { maxPixels })).autoOrient();
    if (size.width !== source.width || size.height !== source.height) pipeline = pipeline.resize(size.width, size.height, { fit: 'fill' });
    const { data, info } = await pipeline
      .flatten({ background: '#ffffff' })
      .removeAlpha()
      .toColourspace('srgb')
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`unexpected decode of ${info.channels} channels`);
    return { pixels: data, width: info.width, height: info.height };
  } catch (e) {
    throw invalid(e);
  }
}

/**
 * A JPEG of `target` size from raw pixels (resized when they are larger) or from an original
 * (auto-oriented, decoded, resized, flattened onto white). Returns the bytes and their size.
 *
 * The standard Huffman tables (`optimiseCoding: false`), not sharp's default per-image ones: that
 * second pass over the coefficients is a third of the encode's CPU (about 9 of 25 ms for a
 * 1024×768 upload) and saves about 1 % of its bytes. It is lossless either way: the vendor decodes
 * the same pixels, and bills by their size (bench/README.md, "Worker CPU per photo").
 */
export async function encodeJpeg(input: RawPixels | { original: Buffer; upright: Size; maxPixels: number }, target: Size, quality: number): Promise<{ data: Buffer } & Size> {
  const current = 'pixels' in input ? { width: input.width, height: input.height } : input.upright;
  try {
    let pipeline = 'pixels' in input
      ? sharp(input.pixels, { raw: { width: input.width, height: input.height, channels: 3 } })
      : (await openImage(input.original, { maxPixels: input.maxPixels })).autoOrient();
    if (target.width !== current.width || target.height !== current.height) pipeline = pipeline.resize(target.width, target.height, { fit: 'fill' });
    const { data, info } = await pipeline.flatten({ background: '#ffffff' }).jpeg({ quality, optimiseCoding: false }).toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height };
  } catch (e) {
    throw invalid(e);
  }
}
