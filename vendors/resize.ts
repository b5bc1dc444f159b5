import { DEFAULT_IMAGE_MAX_PIXELS, type VendorName } from '../core/config.ts';
import { VENDOR_NAMES } from '../core/vendor-names.ts';
import { decodeRaw, encodeJpeg, uprightSize, type Size } from '../images/vendor-pixels.ts';

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

export type { Size };

export interface PreparedImage extends Size {
  data: Buffer;
  mimeType: 'image/jpeg';
  /** Image tokens the vendor bills for this upload (same formula the sim reports). */
  tokens: number;
  /** Decoded size of the input after EXIF auto-orientation, before resizing. */
  source: Size;
}

export const JPEG_QUALITY = 85;

/**
 * A decoded-once copy of an original, for the vendors: auto-oriented, flattened onto white and
 * shrunk to `workCopySize` (never enlarged), as raw 8-bit sRGB pixels (3 channels, row-major), so
 * an upload made from it costs an encode and no decode. `source` is the original's upright size,
 * which decides what each vendor bills. At most 2048×2048×3 bytes (12 MiB).
 */
export interface WorkCopy extends Size {
  /** width × height × 3 bytes of RGB. */
  pixels: Buffer;
  source: Size;
}

/** OpenAI high detail: fit within 2048×2048, then shortest side at most 768; 512-px tiles. */
const OPENAI = { fitBox: 2048, shortSide: 768, tile: 512, baseTokens: 85, tileTokens: 170 } as const;
/** Anthropic: long edge at most 1568 px and at most ~1.15 megapixels; tokens ≈ w·h/750. */
const ANTHROPIC = { longEdge: 1568, maxPixels: Math.floor(1.15 * 1024 * 1024), pixelsPerToken: 750 } as const;
/**
 * Gemini: both sides ≤ 384 px cost one flat 258-token unit, anything larger is cut into 768×768
 * tiles of 258 tokens each. Nothing is free beyond a size, so we choose the cap: at most 2×2
 * tiles (long edge 1536), a detail level comparable to the other two vendors.
 */
const GEMINI = { smallSide: 384, tile: 768, tileTokens: 258, longEdge: 1536 } as const;

function scaled(size: Size, factor: number, round: (n: number) => number = Math.round): Size {
  if (factor >= 1) return size;
  return { width: Math.max(1, round(size.width * factor)), height: Math.max(1, round(size.height * factor)) };
}

/** Size the vendor actually processes (and bills) for an image of the given oriented size. */
export function billedSize(vendor: VendorName, width: number, height: number): Size {
  const size = { width, height };
  switch (vendor) {
    case 'openai': {
      const fitted = scaled(size, OPENAI.fitBox / Math.max(width, height));
      return scaled(fitted, OPENAI.shortSide / Math.min(fitted.width, fitted.height));
    }
    case 'anthropic': {
      const factor = Math.min(
        ANTHROPIC.longEdge / Math.max(width, height),
        Math.sqrt(ANTHROPIC.maxPixels / (width * height)),
      );
      // Floor, so the pixel cap holds after rounding.
      return scaled(size, factor, Math.floor);
    }
    case 'google':
      return scaled(size, GEMINI.longEdge / Math.max(width, height));
  }
}

/**
 * The work copy's size: the largest of the vendors' billed sizes. Each is the original scaled
 * uniformly, so every vendor's size fits inside the largest one (to a pixel of rounding), and a
 * JPEG original shrinks on load toward it (a 12 MP photo decodes at half size).
 */
export function workCopySize(source: Size): Size {
  return VENDOR_NAMES.map((v) => billedSize(v, source.width, source.height)).reduce((a, b) => (b.width * b.height > a.width * a.height ? b : a));
}

/** Input tokens the vendor bills for one image of exactly this size (no further downscaling). */
export function imageTokens(vendor: VendorName, width: number, height: number): number {
  switch (vendor) {
    case 'openai': {
      const tiles = Math.ceil(width / OPENAI.tile) * Math.ceil(height / OPENAI.tile);
      return OPENAI.baseTokens + OPENAI.tileTokens * tiles;
    }
    case 'anthropic':
      return Math.ceil((width * height) / ANTHROPIC.pixelsPerToken);
    case 'google':
      if (width <= GEMINI.smallSide && height <= GEMINI.smallSide) return GEMINI.tileTokens;
      return Math.ceil(width / GEMINI.tile) * Math.ceil(height / GEMINI.tile) * GEMINI.tileTokens;
  }
}

/** Decoded size after EXIF auto-orientation (what a viewer shows). */
export const orientedSize = uprightSize;

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
export async function prepareImage(vendor: VendorName, input: Buffer | WorkCopy, maxPixels = DEFAULT_IMAGE_MAX_PIXELS): Promise<PreparedImage> {
  const fromCopy = !Buffer.isBuffer(input);
  const source = fromCopy ? input.source : await uprightSize(input);
  const target = billedSize(vendor, source.width, source.height);
  const jpeg = await encodeJpeg(fromCopy ? input : { original: input, upright: source, maxPixels }, target, JPEG_QUALITY);
  return { ...jpeg, mimeType: 'image/jpeg', tokens: imageTokens(vendor, jpeg.width, jpeg.height), source };
}
