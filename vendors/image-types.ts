import type { Size } from '../images/vendor-pixels.ts';

/**
 * The shapes of an image on its way to a vendor (vendors/resize.ts makes them). Apart from
 * resize.ts, which reads every vendor's plug-in for its billed sizes, so that the plug-ins and
 * clients can name these types without an import circle back to it.
 */

export interface PreparedImage extends Size {
  data: Buffer;
  mimeType: 'image/jpeg';
  /** Image tokens the vendor bills for this upload (same formula the sim reports). */
  tokens: number;
  /** Decoded size of the input after EXIF auto-orientation, before resizing. */
  source: Size;
}

/**
 * A decoded copy of an original, for the vendors: auto-oriented, flattened onto white and shrunk
 * to the size the vendor it was made for bills (never enlarged), as raw 8-bit sRGB pixels
 * (3 channels, row-major), so an upload made from it costs an encode and no decode; it serves that
 * vendor and every vendor billing no more (vendors/resize.ts `copyServes`). `source` is the
 * original's upright size, which decides what each vendor bills. At most 2048×2048×3 bytes (12 MiB).
 */
export interface WorkCopy extends Size {
  /** width × height × 3 bytes of RGB. */
  pixels: Buffer;
  source: Size;
}
