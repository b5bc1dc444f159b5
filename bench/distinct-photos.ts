import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

const SOURCE = fileURLToPath(new URL('../test/fixtures/photos/gps-DSCN0010.jpg', import.meta.url));

/**
 * `count` distinct 320×240 JPEGs (base64), numbered from `from`: the number is drawn as a row of
 * black and white 16×16 blocks, which survives JPEG, so no two are the same photo to Lenstack.
 */
export async function distinctPhotos(from: number, count: number): Promise<string[]> {
  const source = await sharp(path.resolve(SOURCE)).resize(320, 240).raw().toBuffer({ resolveWithObject: true });
  const out: string[] = [];
  for (let i = from; i < from + count; i++) {
    const px = Buffer.from(source.data);
    for (let bit = 0; bit < 14; bit++) {
      const v = (i >> bit) & 1 ? 255 : 0;
      for (let y = 0; y < 16; y++) for (let x = 0; x < 16; x++) px.set([v, v, v], (y * 320 + (bit % 20) * 16 + x) * 3);
    }
    out.push((await sharp(px, { raw: source.info }).jpeg({ quality: 85 }).toBuffer()).toString('base64'));
  }
  return out;
}
