import sharp from 'sharp';
import { openImage } from './open.ts';
import { HASH_GRID } from './perceptual-hash.ts';

/**
 * The one decode of an image at intake. Its pixels, upright, flattened onto white, sRGB and shrunk
 * to one small intermediate, serve both the fingerprint (greyscale of it) and, when the caller asks
 * for one, the embedding: an image is not decoded a second time for either.
 *
 * 288 = 9·32 and 256 = 8·32, so each pHash pixel is a 9×8 block mean and each dHash pixel a 32×32
 * block mean of it (perceptual-hash.ts). JPEG and WebP shrink on load: a 12 MP JPEG decodes at 1/8.
 * HEVC has no such thing; a HEIC is decoded from its embedded thumbnail when it carries one that
 * fits (docs/decisions.md, "The fingerprint of a HEIC"), else in full.
 */
export const INTERMEDIATE = { width: HASH_GRID.gradientW * HASH_GRID.dct, height: HASH_GRID.gradientH * HASH_GRID.dct } as const;

export interface UprightPixels {
  /** Interleaved RGB, 8 bits per channel, INTERMEDIATE.width × INTERMEDIATE.height. */
  rgb: Buffer;
  width: number;
  height: number;
}

/** `maxPixels`: the configured IMAGE_MAX_PIXELS, which the HEIC/BMP decoder enforces as it decodes. */
export async function decodeUpright(bytes: Buffer, opts: { maxPixels: number; signal?: AbortSignal }): Promise<UprightPixels> {
  const { data, info } = await (await openImage(bytes, { ...opts, purpose: 'fingerprint' }))
    .autoOrient() // same as .rotate() without arguments
    .flatten({ background: '#ffffff' }) // transparent pixels have arbitrary colour underneath
    .resize(INTERMEDIATE.width, INTERMEDIATE.height, { fit: 'fill' })
    .removeAlpha()
    .toColourspace('srgb')
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== 3 || info.width !== INTERMEDIATE.width || info.height !== INTERMEDIATE.height) {
    throw new Error(`unexpected intermediate ${info.width}×${info.height}×${info.channels}`);
  }
  return { rgb: data, width: info.width, height: info.height };
}

/** The intermediate as 8-bit greyscale (libvips' own conversion, as a greyscale decode would give). */
export async function greyscale(px: UprightPixels): Promise<Uint8Array> {
  const grey = await sharp(px.rgb, { raw: { width: px.width, height: px.height, channels: 3 } })
    .greyscale()
    .raw({ depth: 'uchar' })
    .toBuffer();
  return new Uint8Array(grey.buffer, grey.byteOffset, grey.length);
}
