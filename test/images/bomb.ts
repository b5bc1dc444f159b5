import { deflateSync } from 'node:zlib';
import { pngFrom } from '../hostile/images/containers.ts';

/**
 * A real decompression bomb: a valid, fully decodable 1-bit black PNG of width × height whose
 * file is tiny. Written directly (sharp needs ~19 s to encode 900 MP on our 2-core machines;
 * this takes well under a second and yields the same kind of file).
 */
export function solidPngBomb(width: number, height: number): Buffer {
  const rowBytes = 1 + Math.ceil(width / 8); // filter byte + 1 bit per pixel
  // All-zero rows (filter 0, black pixels); deflate squeezes them about 1000:1.
  const idat = deflateSync(Buffer.alloc(rowBytes * height), { level: 9 });
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // greyscale
  return pngFrom([
    { type: 'IHDR', data: ihdr },
    { type: 'IDAT', data: idat },
    { type: 'IEND', data: Buffer.alloc(0) },
  ]);
}
