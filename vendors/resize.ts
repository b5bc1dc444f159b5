import { DEFAULT_IMAGE_MAX_PIXELS, type VendorName } from '../core/config.ts';
import { VENDOR_NAMES } from '../core/vendor-names.ts';
import { VENDOR_REGISTRY } from './registry.ts';
import { decodeRaw, encodeJpeg, uprightSize, type Size } from '../images/vendor-pixels.ts';
import type { PreparedImage, WorkCopy } from './image-types.ts';

/**
 * What each vendor bills for an image, and the uploads made to it (the pixel work is in
 * images/vendor-pixels.ts, the one owner of sharp). Each vendor bills an image by its pixel size after
 * the vendor's own downscaling, so we downscale to exactly that size first: the tokens are the
 * same, the upload is smaller, and the token count is known before the call. The vendor
 * simulator bills from its own reading of the published rules (tools/sim/billing.ts), so a test
 * comparing this estimate with the sim's usage fields checks it against an independent figure.
 *
 * The original is decoded once per analysis, into a work copy (`makeWorkCopy`): upright, on white,
 * at the largest size any vendor bills for it (within 2048×2048), kept as raw pixels. Every vendor
 * attempt then prepares its upload from that copy with no decode: a resize to its billed size when
 * that is smaller, and the JPEG encode.
 */

export type { PreparedImage, Size, WorkCopy };

export const JPEG_QUALITY = 85;

/** Size the vendor actually processes (and bills) for an image of the given oriented size (its plug-in's rule, vendors/<vendor>/index.ts). */
export function billedSize(vendor: VendorName, width: number, height: number): Size {
  return VENDOR_REGISTRY[vendor].billedSize(width, height);
}

/**
 * The work copy's size: the largest of the vendors' billed sizes. Each is the original scaled
 * uniformly, so every vendor's size fits inside the largest one (to a pixel of rounding), and a
 * JPEG original shrinks on load toward it (a 12 MP photo decodes at half size).
 */
export function workCopySize(source: Size): Size {
  return VENDOR_NAMES.map((v) => billedSize(v, source.width, source.height)).reduce((a, b) => (b.width * b.height > a.width * a.height ? b : a));
}

/** Input tokens the vendor bills for one image of exactly this size (no further downscaling; its plug-in's rule). */
export function imageTokens(vendor: VendorName, width: number, height: number): number {
  return VENDOR_REGISTRY[vendor].imageTokens(width, height);
}

/** Decoded size after EXIF auto-orientation (what a viewer shows). */
export const orientedSize = uprightSize;

/** An upload prepared already (it carries its encoded bytes), as opposed to an original or a work copy. */
export function isPrepared(image: Buffer | WorkCopy | PreparedImage): image is PreparedImage {
  return !Buffer.isBuffer(image) && 'data' in image;
}

/** The one decode of an original per analysis: see WorkCopy. */
export async function makeWorkCopy(input: Buffer, maxPixels = DEFAULT_IMAGE_MAX_PIXELS): Promise<WorkCopy> {
  const source = await uprightSize(input);
  const raw = await decodeRaw(input, source, workCopySize(source), maxPixels);
  return { ...raw, source };
}

/**
 * Downscale to the vendor's billed size and encode as JPEG (images/vendor-pixels.ts: upright, on
 * white, pixels only). From a work copy, the billed size is that of its original (the copy is
 * never smaller than any billed size, up to a pixel of rounding), so the upload is the same as
 * from the original.
 */
export async function prepareImage(vendor: VendorName, input: Buffer | WorkCopy | PreparedImage, maxPixels = DEFAULT_IMAGE_MAX_PIXELS): Promise<PreparedImage> {
  // Prepared already, for this vendor, ahead of its call (activities/vendors.ts): sent as it is.
  if (isPrepared(input)) return input;
  const fromCopy = !Buffer.isBuffer(input);
  const source = fromCopy ? input.source : await uprightSize(input);
  const target = billedSize(vendor, source.width, source.height);
  const jpeg = await encodeJpeg(fromCopy ? input : { original: input, upright: source, maxPixels }, target, JPEG_QUALITY);
  return { ...jpeg, mimeType: 'image/jpeg', tokens: imageTokens(vendor, jpeg.width, jpeg.height), source };
}
