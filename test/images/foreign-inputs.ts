/**
 * Hand-made HEIC and BMP inputs for tests, written without the libraries that decode them.
 */

/** A 24-bit uncompressed BMP (BITMAPINFOHEADER) of interleaved RGB pixels. */
export function bmpOf(rgb: Buffer, width: number, height: number, opts: { topDown?: boolean } = {}): Buffer {
  const rowBytes = Math.ceil((width * 3) / 4) * 4;
  const out = Buffer.alloc(54 + rowBytes * height);
  out.write('BM', 0, 'latin1');
  out.writeUInt32LE(out.length, 2);
  out.writeUInt32LE(54, 10);
  out.writeUInt32LE(40, 14);
  out.writeInt32LE(width, 18);
  out.writeInt32LE(opts.topDown ? -height : height, 22);
  out.writeUInt16LE(1, 26);
  out.writeUInt16LE(24, 28);
  out.writeUInt32LE(rowBytes * height, 34);
  for (let y = 0; y < height; y++) {
    const row = 54 + (opts.topDown ? y : height - 1 - y) * rowBytes;
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      out[row + x * 3] = rgb[i + 2]!; // stored B, G, R
      out[row + x * 3 + 1] = rgb[i + 1]!;
      out[row + x * 3 + 2] = rgb[i]!;
    }
  }
  return out;
}

/**
 * A copy of a HEIC whose image-size property (ispe) of the primary image declares another size:
 * the header then claims what an attacker wants, whatever the coded data holds.
 */
export function heicDeclaring(heic: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(heic);
  let patched = 0;
  for (let at = out.indexOf('ispe'); at >= 0; at = out.indexOf('ispe', at + 4)) {
    // box: size(4) 'ispe'(4) version+flags(4) width(4) height(4); tiles are 512×512.
    if (out.readUInt32BE(at + 8) === 512 && out.readUInt32BE(at + 12) === 512) continue;
    out.writeUInt32BE(width, at + 8);
    out.writeUInt32BE(height, at + 12);
    patched += 1;
  }
  if (patched !== 1) throw new Error(`expected one primary ispe box, patched ${patched}`);
  return out;
}
