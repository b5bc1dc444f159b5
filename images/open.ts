import sharp, { type Sharp } from 'sharp';
import { imageInvalid, imageTooLarge } from '../core/errors.ts';
import { bmpForDecoder, readBmpHeader } from './bmp-header.ts';
import { decodeForeign, type DecodePurpose, type ForeignKind } from './foreign-decode.ts';
import { sniffContainer, type Container } from './sniff.ts';

/**
 * The one way image bytes become pixels. Every decode (probe's check, the fingerprint, the
 * vendor's work copy) opens the image here, so every format is read the same way everywhere:
 * libvips (sharp) for what it decodes, images/foreign-decode.ts for HEVC-coded HEIF and BMP,
 * handed back as a sharp pipeline over their raw pixels.
 */

/** libvips fails on decoder errors and truncation but tolerates warnings (e.g. stray bytes). */
export const DECODE_FAIL_ON = 'error' as const;

/** sharp's own default limitInputPixels (0x3FFF²), for callers whose limit was checked by probe. */
const SHARP_DEFAULT_MAX_PIXELS = 0x3fff * 0x3fff;

export interface ImageHeader {
  container: Container;
  /** libvips' format name ('jpeg', 'heif', …), 'bmp' for BMP. */
  format: string;
  /** The coding inside a HEIF container ('hevc', 'av1'); undefined elsewhere. */
  compression?: string;
  /** Stored size. */
  width: number;
  height: number;
  /** EXIF orientation 1–8, when one applies to the pixels. */
  orientation?: number;
  /** Size as displayed, orientation applied. */
  upright: { width: number; height: number };
}

/**
 * The header only, nothing decoded. Unknown containers are refused before any parser sees them
 * (sniff.ts); a header libvips cannot read throws its error (the caller words the refusal).
 */
export async function readHeader(bytes: Buffer): Promise<ImageHeader> {
  const container = sniffContainer(bytes);
  if (container === null) throw imageInvalid('Unsupported image format');
  if (container === 'bmp') {
    const { width, height } = readBmpHeader(bytes);
    return { container, format: 'bmp', width, height, upright: { width, height } };
  }
  const meta = await sharp(bytes, { limitInputPixels: false, failOn: DECODE_FAIL_ON }).metadata();
  const { width, height } = meta;
  if (isHevc(container, meta.compression)) {
    // libheif rotates and mirrors by the container's irot/imir boxes as it decodes; an EXIF
    // orientation in a HEIC is informational only (HEIF spec), so it is not applied a second time.
    return { container, format: meta.format, compression: meta.compression, width, height, upright: { width, height } };
  }
  return {
    container,
    format: meta.format,
    ...(meta.compression === undefined ? {} : { compression: meta.compression }),
    width,
    height,
    ...(meta.orientation === undefined ? {} : { orientation: meta.orientation }),
    upright: meta.autoOrient ?? { width, height },
  };
}

/**
 * A sharp pipeline over the image's pixels, decoded at most `maxPixels` (sharp's default when the
 * caller's probe already checked the limit). Native formats decode lazily in libvips (JPEG/WebP
 * shrink on load); HEVC-HEIF and BMP are decoded in full first, off the event loop.
 *
 * `purpose: 'fingerprint'` (images/decode.ts only): the pipeline only feeds the small fingerprint
 * intermediate, so a HEIC may come from its embedded thumbnail (docs/decisions.md, "The fingerprint
 * of a HEIC"): its pixels are then that thumbnail's, smaller than the image's declared size.
 */
export async function openImage(bytes: Buffer, opts: { maxPixels?: number; signal?: AbortSignal; purpose?: DecodePurpose } = {}): Promise<Sharp> {
  const maxPixels = opts.maxPixels ?? SHARP_DEFAULT_MAX_PIXELS;
  const kind = await foreignKind(bytes);
  if (kind === null) return sharp(bytes, { limitInputPixels: maxPixels, failOn: DECODE_FAIL_ON });
  if (kind === 'bmp') {
    const { width, height, pixelsEnd } = readBmpHeader(bytes);
    // bmp-ts allocates width × height × 4 bytes up front: the limit is checked here, as libheif's is in its worker.
    if (width * height > maxPixels) throw imageTooLarge(`Image is ${width}×${height} (${width * height} pixels), over the ${maxPixels}-pixel limit`);
    if (pixelsEnd > bytes.length) {
      throw imageInvalid(`Image is corrupt or truncated: BMP declares ${width}×${height} pixels, more than its ${bytes.length} bytes hold`);
    }
  }
  // The caller's signal (its client's connection): a decode nobody waits for leaves the queue.
  const { pixels, width, height } = await decodeForeign(kind, kind === 'bmp' ? bmpForDecoder(bytes) : bytes, maxPixels, {
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.purpose ? { purpose: opts.purpose } : {}),
  });
  return sharp(pixels, { raw: { width, height, channels: 3 } });
}

async function foreignKind(bytes: Buffer): Promise<ForeignKind | null> {
  const container = sniffContainer(bytes);
  if (container === 'bmp') return 'bmp';
  if (container !== 'isobmff') return null;
  const meta = await sharp(bytes, { limitInputPixels: false, failOn: DECODE_FAIL_ON }).metadata();
  return isHevc(container, meta.compression) ? 'heif' : null;
}

function isHevc(container: Container, compression: string | undefined): boolean {
  return container === 'isobmff' && compression === 'hevc';
}
