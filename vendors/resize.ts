import { DEFAULT_IMAGE_MAX_PIXELS, type VendorName } from '../core/config.ts';
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
 * The original is decoded into a work copy (`makeWorkCopy`): upright, on white, at the size the
 * vendor asked first bills for it (within 2048×2048), kept as raw pixels. Every vendor attempt then
 * prepares its upload from a copy with no decode: the JPEG encode, after a resize when the copy is
 * another, larger-billing vendor's. A fallback to a vendor billing a larger size than the copy has
 * decodes the original again at that size (vendors/work-copies.ts; docs/decisions.md, "The work
 * copy's size"), so an analysis decodes once unless it falls back to such a vendor.
 */

export type { PreparedImage, Size, WorkCopy };

export const JPEG_QUALITY = 85;

/** Size the vendor actually processes (and bills) for an image of the given oriented size (its plug-in's rule, vendors/<vendor>/index.ts). */
export function billedSize(vendor: VendorName, width: number, height: number): Size {
  return VENDOR_REGISTRY[vendor].billedSize(width, height);
}

/**
 * Whether a work copy can give the vendor its upload: the copy is at least the size the vendor
 * bills for its original, in both sides. Each billed size is the original scaled uniformly, so a
 * copy made for a vendor billing more holds every smaller billed size; two sizes within a pixel of
 * each other may round apart in one side (OpenAI bills a 769×769 photo 768×768, Google 769×769),
 * and then the copy does not serve: a pixel of upscale would change the upload and the tokens the
 * vendor bills (258 against 1,032 there). A copy that does not serve the vendor is never upscaled
 * to its size: the original is decoded again (vendors/work-copies.ts). A copy made for a vendor is
 * exactly its billed size, so it always serves that vendor.
 */
export function copyServes(copy: WorkCopy, vendor: VendorName): boolean {
  const target = billedSize(vendor, copy.source.width, copy.source.height);
  return copy.width >= target.width && copy.height >= target.height;
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

/**
 * The decode of an original into a work copy for the vendor (see WorkCopy): at the size the vendor
 * bills for it, so a JPEG original shrinks on load toward that size, and the vendor's upload from
 * the copy is an encode with no resize.
 */
export async function makeWorkCopy(input: Buffer, vendor: VendorName, maxPixels = DEFAULT_IMAGE_MAX_PIXELS): Promise<WorkCopy> {
  const source = await uprightSize(input);
  const raw = await decodeRaw(input, source, billedSize(vendor, source.width, source.height), maxPixels);
  return { ...raw, source };
}

/**
 * Downscale to the vendor's billed size and encode as JPEG (images/vendor-pixels.ts: upright, on
 * white, pixels only). From a work copy, the billed size is that of its original, and the copy
 * must serve the vendor (`copyServes`): never an upscale of a smaller vendor's copy. From a copy
 * made for this vendor (or one billing the same size) the upload is the encode of the copy's
 * pixels, the same as from the original; from a larger vendor's copy it is that copy resized.
 */
export async function prepareImage(vendor: VendorName, input: Buffer | WorkCopy | PreparedImage, maxPixels = DEFAULT_IMAGE_MAX_PIXELS): Promise<PreparedImage> {
  // Prepared already, for this vendor, ahead of its call (activities/vendors.ts): sent as it is.
  if (isPrepared(input)) return input;
  const fromCopy = !Buffer.isBuffer(input);
  if (fromCopy && !copyServes(input, vendor)) throw new Error(`a ${input.width}×${input.height} work copy is smaller than what ${vendor} bills for its ${input.source.width}×${input.source.height} original`);
  const source = fromCopy ? input.source : await uprightSize(input);
  const target = billedSize(vendor, source.width, source.height);
  const jpeg = await encodeJpeg(fromCopy ? input : { original: input, upright: source, maxPixels }, target, JPEG_QUALITY);
  return { ...jpeg, mimeType: 'image/jpeg', tokens: imageTokens(vendor, jpeg.width, jpeg.height), source };
}
