// Decodes one HEVC-coded HEIF (HEIC) or one BMP to interleaved 8-bit RGB, in a worker thread of
// its own (images/foreign-decode.ts starts one per image and ends it after): the WASM decode takes
// seconds of CPU and the WASM heap never shrinks, so neither stays with the process.
//
// Plain JavaScript: a worker thread runs outside tsx/vitest's TypeScript loaders.
// Input (workerData): { kind: 'heif' | 'bmp', bytes: Uint8Array, maxPixels: number }.
// Output (one message): { ok: true, width, height, pixels: ArrayBuffer } or
// { ok: false, reason: 'too-large' | 'invalid' | 'failed', message } ('failed': not the image's fault).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

const require = createRequire(import.meta.url);

class Refusal extends Error {
  constructor(reason, message) {
    super(message);
    this.reason = reason;
  }
}

async function decodeHeif(bytes, maxPixels) {
  const wasmBinary = readFileSync(require.resolve('libheif-js/libheif-wasm/libheif.wasm'));
  const heif = await require('libheif-js/libheif-wasm/libheif.js')({ wasmBinary });
  // libheif's own ceiling on any image it allocates (heif_security_limits.max_image_size_pixels, a
  // uint64 at offset 8 of the struct, version ≥ 1): our pixel limit, so an HEVC stream larger than
  // the size its header declared is refused by libheif before its planes are allocated.
  const limits = heif._heif_get_global_security_limits();
  if (heif.HEAPU8[limits] < 1) throw new Error('libheif without security limits');
  heif.HEAPU32[limits / 4 + 2] = maxPixels;
  heif.HEAPU32[limits / 4 + 3] = 0;

  const ctx = heif.heif_context_alloc();
  try {
    const read = heif.heif_context_read_from_memory(ctx, bytes);
    if (read.code !== heif.heif_error_code.heif_error_Ok) throw new Refusal('invalid', `HEIF could not be read: ${read.message}`);
    const ids = heif.heif_js_context_get_list_of_top_level_image_IDs(ctx);
    if (!Array.isArray(ids) || ids.length === 0) throw new Refusal('invalid', 'HEIF holds no image');
    const handles = ids.map((id) => heif.heif_js_context_get_image_handle(ctx, id));
    try {
      const handle = handles.find((h) => !h.code && heif.heif_image_handle_is_primary_image(h)) ?? handles.find((h) => !h.code);
      if (!handle) throw new Refusal('invalid', 'HEIF has no readable image');
      // Declared size after libheif's own transformations (rotation, mirroring, crop): checked before
      // a single pixel is decoded.
      const width = heif.heif_image_handle_get_width(handle);
      const height = heif.heif_image_handle_get_height(handle);
      if (!(width > 0 && height > 0)) throw new Refusal('invalid', 'HEIF image has no dimensions');
      if (width * height > maxPixels) throw new Refusal('too-large', `Image is ${width}×${height} (${width * height} pixels), over the ${maxPixels}-pixel limit`);

      const img = await heif.heif_js_decode_image2(handle, heif.heif_colorspace.heif_colorspace_RGB, heif.heif_chroma.heif_chroma_interleaved_RGB);
      if (!img || img.code) {
        const message = img?.message ?? 'unknown error';
        throw new Refusal(/security limit/i.test(message) ? 'too-large' : 'invalid', `HEIF could not be decoded: ${message}`);
      }
      try {
        // libheif decodes a damaged or truncated file "leniently": missing tiles become warnings and
        // grey pixels. A photo with holes is refused like a truncated JPEG.
        const ptr = img.image?.$$?.ptr;
        if (typeof ptr !== 'number') throw new Error('libheif-js image without a pointer: cannot check decoding warnings');
        const warnings = heif._heif_image_get_decoding_warnings(ptr, 0, 0, 0);
        if (warnings > 0) throw new Refusal('invalid', `Image is corrupt or truncated: ${warnings} part(s) of the HEIF could not be decoded`);
        const plane = img.channels.find((c) => c.id === heif.heif_channel.heif_channel_interleaved);
        if (!plane) throw new Refusal('invalid', 'HEIF decoded without an RGB plane');
        if (plane.width !== width || plane.height !== height) {
          throw new Refusal('invalid', `HEIF decoded to ${plane.width}×${plane.height}, not its declared ${width}×${height}`);
        }
        const rowBytes = width * 3;
        const pixels = new Uint8Array(rowBytes * height);
        for (let y = 0; y < height; y++) pixels.set(plane.data.subarray(y * plane.stride, y * plane.stride + rowBytes), y * rowBytes);
        return { width, height, pixels };
      } finally {
        heif.heif_image_release(img.image);
      }
    } finally {
      for (const h of handles) if (!h.code) heif.heif_image_handle_release(h);
    }
  } finally {
    heif.heif_context_free(ctx);
  }
}

async function decodeBmp(bytes) {
  const { decode } = await import('bmp-ts');
  let bmp;
  try {
    bmp = decode(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length), { toRGBA: true });
  } catch (err) {
    throw new Refusal('invalid', `BMP could not be decoded: ${err instanceof Error ? err.message : String(err)}`);
  }
  const { width, height, data } = bmp;
  // Alpha is dropped: most BMP writers leave the fourth byte zero, which would read as transparent.
  const pixels = new Uint8Array(width * height * 3);
  for (let i = 0, o = 0; o < pixels.length; i += 4, o += 3) {
    pixels[o] = data[i];
    pixels[o + 1] = data[i + 1];
    pixels[o + 2] = data[i + 2];
  }
  return { width, height, pixels };
}

try {
  const { kind, bytes, maxPixels } = workerData;
  const { width, height, pixels } = kind === 'heif' ? await decodeHeif(bytes, maxPixels) : await decodeBmp(bytes);
  parentPort.postMessage({ ok: true, width, height, pixels: pixels.buffer }, [pixels.buffer]);
} catch (err) {
  // A Refusal is what this decoder found wrong with the image; anything else is its own failure.
  const reason = err instanceof Refusal ? err.reason : 'failed';
  const message = err instanceof Error ? err.message : String(err);
  parentPort.postMessage({ ok: false, reason, message });
}
