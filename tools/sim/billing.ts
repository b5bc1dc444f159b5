import type { VendorName } from '../../core/config.ts';

/**
 * What each simulated vendor bills for an image it received, from the vendors' published rules,
 * written here on purpose apart from the product's own estimate (vendors/resize.ts): the sim is
 * the vendor, so a test comparing the product's estimate with the sim's usage fields checks the
 * product against the published formulas, not against itself.
 *
 * - OpenAI (vision guide, "Calculating costs", detail "high"): the image is scaled to fit within a
 *   2048 × 2048 square, then so that its shortest side is 768 px (never enlarged); it costs
 *   85 tokens plus 170 per 512 × 512 tile needed to cover it.
 * - Anthropic (vision guide, "Evaluate image size"): an image whose long edge is over 1568 px, or
 *   larger than the largest sizes the guide lists as not resized (about 1.15 megapixels, e.g.
 *   1092 × 1092, 951 × 1268), is first scaled down keeping its aspect ratio; it then costs about
 *   width × height / 750 tokens.
 * - Gemini (token guide, images): both sides at most 384 px cost 258 tokens; a larger image is
 *   cut into 768 × 768 tiles, 258 tokens each. Gemini does not bill a smaller size than it got.
 */

interface Dimensions {
  width: number;
  height: number;
}

/** Anthropic's largest unresized size in its guide's table (951 × 1268, 3:4): the pixel ceiling. */
const ANTHROPIC_MAX_PIXELS = 951 * 1268;

function shrink(d: Dimensions, factor: number): Dimensions {
  if (factor >= 1) return d;
  return { width: Math.max(1, Math.round(d.width * factor)), height: Math.max(1, Math.round(d.height * factor)) };
}

function openaiTokens(received: Dimensions): number {
  let d = shrink(received, 2048 / Math.max(received.width, received.height));
  d = shrink(d, 768 / Math.min(d.width, d.height));
  const tiles = Math.ceil(d.width / 512) * Math.ceil(d.height / 512);
  return 85 + 170 * tiles;
}

function anthropicTokens(received: Dimensions): number {
  let d = received;
  if (Math.max(d.width, d.height) > 1568) d = shrink(d, 1568 / Math.max(d.width, d.height));
  if (d.width * d.height > ANTHROPIC_MAX_PIXELS) d = shrink(d, Math.sqrt(ANTHROPIC_MAX_PIXELS / (d.width * d.height)));
  return Math.ceil((d.width * d.height) / 750);
}

function geminiTokens(received: Dimensions): number {
  if (received.width <= 384 && received.height <= 384) return 258;
  return 258 * Math.ceil(received.width / 768) * Math.ceil(received.height / 768);
}

/** Input tokens the vendor bills for one image of the size it received. */
export function vendorImageTokens(vendor: VendorName, received: Dimensions): number {
  switch (vendor) {
    case 'openai':
      return openaiTokens(received);
    case 'anthropic':
      return anthropicTokens(received);
    case 'google':
      return geminiTokens(received);
  }
}
