import { crc32, deflateSync } from 'node:zlib';

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
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}
