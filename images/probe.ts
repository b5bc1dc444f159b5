import sharp, { type Metadata } from 'sharp';
import { AppError, imageInvalid, imageTooLarge } from '../core/errors.ts';
import { sniffContainer, type Container } from './sniff.ts';

/**
 * Decides whether bytes are an image we accept, and how big it is, before anything is stored:
 * magic bytes → header (pixel cap, no decode) → one cheap full decode (truncation/corruption).
 */

export type ImageFormat = 'jpeg' | 'png' | 'webp' | 'gif' | 'tiff' | 'avif' | 'heif';

export interface ProbeResult {
  format: ImageFormat;
  /** Upright (display) size: EXIF orientation already applied, as fingerprint() sees it. */
  width: number;
  height: number;
  /** EXIF orientation 1–8 when the file carries one; 5–8 mean stored width/height are swapped. */
  orientation?: number;
  mime: string;
}

/** libvips fails on decoder errors and truncation but tolerates warnings (e.g. stray bytes). */
export const DECODE_FAIL_ON = 'error' as const;

/** Pixels per stored byte above which a large image is refused unread (camera JPEGs: ~2–20). */
export const MAX_PIXELS_PER_BYTE = 1_000;
/** The ratio applies above this size (4 MP): smaller images decode cheaply whatever they claim. */
const BOMB_MIN_PIXELS = 4_000_000;

const MIME: Record<ImageFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  gif: 'image/gif',
  tiff: 'image/tiff',
  avif: 'image/avif',
  heif: 'image/heif',
};

const ACCEPTED = 'JPEG, PNG, WebP, GIF, TIFF or AVIF';

/**
 * `decode: false` skips the full decode check: for bytes already in the blob store, which passed
 * it when they were first taken in (same SHA-256, same bytes).
 */
export async function probeImage(bytes: Buffer, opts: { maxPixels: number; decode?: boolean }): Promise<ProbeResult> {
  const container = sniffContainer(bytes);
  if (container === null) throw imageInvalid(`Unsupported image format: expected ${ACCEPTED}`);

  let meta: Metadata;
  try {
    // Header only, nothing decoded; our own pixel check below gives the clearer error.
    meta = await sharp(bytes, { limitInputPixels: false, failOn: DECODE_FAIL_ON }).metadata();
  } catch (err) {
    throw imageInvalid(`Image could not be read: ${reason(err)}`);
  }
  const format = formatOf(container, meta);
  if (format === null) throw imageInvalid(`Image content does not match its ${container} signature`);
  const { width, height } = meta;
  if (!(width > 0 && height > 0)) throw imageInvalid('Image has no dimensions');
  if (width * height > opts.maxPixels) {
    throw imageTooLarge(`Image is ${width}×${height} (${width * height} pixels), over the ${opts.maxPixels}-pixel limit`);
  }
  // A few kilobytes that claim tens of megapixels cost a gigabyte and seconds of CPU to decode,
  // for any caller: refused from the header, before any decode. Real photos stay far below this.
  if (width * height > BOMB_MIN_PIXELS && (width * height) / bytes.length > MAX_PIXELS_PER_BYTE) {
    throw imageTooLarge(
      `Image claims ${width}×${height} pixels from only ${bytes.length} bytes (over ${MAX_PIXELS_PER_BYTE} pixels per byte): refused as a decompression bomb`,
    );
  }

  if (opts.decode !== false) await decodeCheck(bytes, opts.maxPixels);

  const upright = meta.autoOrient ?? { width, height };
  const base = { format, width: upright.width, height: upright.height, mime: MIME[format] };
  return meta.orientation === undefined ? base : { ...base, orientation: meta.orientation };
}

function formatOf(container: Container, meta: Metadata): ImageFormat | null {
  if (container === 'isobmff') {
    if (meta.format !== 'heif') return null;
    return meta.compression === 'av1' ? 'avif' : 'heif';
  }
  return meta.format === container ? container : null;
}

/**
 * Headers of truncated JPEG, PNG and AVIF files parse fine, so decode every pixel once,
 * scaled down on load (JPEG/WebP decode at 1/8 size but still read all entropy-coded data).
 */
async function decodeCheck(bytes: Buffer, maxPixels: number): Promise<void> {
  try {
    await sharp(bytes, { limitInputPixels: maxPixels, failOn: DECODE_FAIL_ON })
      .resize(32, 32, { fit: 'inside' })
      .raw()
      .toBuffer();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (/exceeds pixel limit/i.test(message)) throw imageTooLarge(`Image is over the ${maxPixels}-pixel limit`);
    if (/HEVC/.test(message)) {
      throw imageInvalid(`HEIC/HEIF images (HEVC-compressed) are not supported: send ${ACCEPTED}`);
    }
    throw imageInvalid(`Image is corrupt or truncated: ${reason(err)}`);
  }
}

function reason(err: unknown): string {
  if (err instanceof AppError) return err.message;
  const message = err instanceof Error ? err.message : String(err);
  // libvips prepends noise lines ("source: bad seek to …"); the last line names the cause.
  const lines = message.split('\n').filter((l) => l.trim() !== '');
  return (lines.at(-1) ?? 'unknown error').slice(0, 200);
}
