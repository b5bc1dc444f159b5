import { AppError, corruptImage, imageInvalid, imageTooLarge, UNREADABLE_IMAGE } from '../core/errors.ts';
import { openImage, readHeader, type ImageHeader } from './open.ts';
import { sniffContainer } from './sniff.ts';

/**
 * Decides whether bytes are an image we accept, and how big it is, before anything is stored:
 * magic bytes → header (pixel cap, no decode) → one cheap full decode (truncation/corruption).
 */

export type ImageFormat = 'jpeg' | 'png' | 'webp' | 'gif' | 'tiff' | 'avif' | 'heif' | 'bmp';

export interface ProbeResult {
  format: ImageFormat;
  /** Upright (display) size: EXIF orientation already applied, as fingerprint() sees it. */
  width: number;
  height: number;
  /** EXIF orientation 1–8 when the file carries one; 5–8 mean stored width/height are swapped. */
  orientation?: number;
  mime: string;
}

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
  bmp: 'image/bmp',
};

/** What intake accepts, as the API documents it (OpenAPI, llms.txt) and refusals name it. */
export const ACCEPTED_FORMATS = 'JPEG, PNG, WebP, GIF (first frame), TIFF (first page), AVIF, HEIC/HEIF or BMP';

/**
 * `decode: false` skips the full decode check: for bytes already in the blob store, which passed
 * it when they were first taken in (same SHA-256, same bytes).
 */
export async function probeImage(bytes: Buffer, opts: { maxPixels: number; decode?: boolean }): Promise<ProbeResult> {
  const container = sniffContainer(bytes);
  if (container === null) throw imageInvalid(`Unsupported image format: expected ${ACCEPTED_FORMATS}`);

  let header: ImageHeader;
  try {
    // Header only, nothing decoded; our own pixel check below gives the clearer error.
    header = await readHeader(bytes);
  } catch (err) {
    throw corruptImage(err, UNREADABLE_IMAGE);
  }
  const format = formatOf(header);
  if (format === null) throw imageInvalid(`Image content does not match its ${container} signature`);
  const { width, height } = header;
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

  const { upright } = header;
  const base = { format, width: upright.width, height: upright.height, mime: MIME[format] };
  return header.orientation === undefined ? base : { ...base, orientation: header.orientation };
}

function formatOf(header: ImageHeader): ImageFormat | null {
  if (header.container === 'isobmff') {
    if (header.format !== 'heif') return null;
    return header.compression === 'av1' ? 'avif' : 'heif';
  }
  return header.format === header.container ? header.container : null;
}

/**
 * Headers of truncated JPEG, PNG, AVIF and HEIC files parse fine, so decode every pixel once,
 * scaled down on load (JPEG/WebP decode at 1/8 size but still read all entropy-coded data).
 */
async function decodeCheck(bytes: Buffer, maxPixels: number): Promise<void> {
  try {
    const image = await openImage(bytes, { maxPixels });
    await image.resize(32, 32, { fit: 'inside' }).raw().toBuffer();
  } catch (err) {
    // The HEIC/BMP decoder words its own refusals (pixel limit, truncation) in the envelope.
    if (err instanceof AppError) throw err;
    const message = err instanceof Error ? err.message : String(err);
    if (/exceeds pixel limit/i.test(message)) throw imageTooLarge(`Image is over the ${maxPixels}-pixel limit`);
    throw corruptImage(err);
  }
}

