import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

/**
 * Camera-like JPEGs for the benches (bench/fleet.ts, bench/photo-cpu.ts): the fixture
 * `gps-DSCN0010.jpg` enlarged to 4.9–7.1 MP (2560×1920 to 3072×2304, 4:3) with sensor-like noise
 * (a fixed LCG, so every run makes the same bytes), quality 95: 3.4 to 4.9 MB, a phone camera's
 * size and entropy.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));

export async function cameraPhotos(count: number): Promise<Buffer[]> {
  const source = path.join(ROOT, 'test/fixtures/photos/gps-DSCN0010.jpg');
  const pool: Buffer[] = [];
  let x = 12345;
  for (let k = 0; k < count; k++) {
    const width = 2560 + Math.round((k * (3072 - 2560)) / Math.max(1, count - 1) / 16) * 16;
    const height = (width * 3) / 4;
    const { data, info } = await sharp(source).resize(width, height).raw().toBuffer({ resolveWithObject: true });
    for (let j = 0; j < data.length; j++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      data[j] = Math.max(0, Math.min(255, data[j]! + ((x >>> 24) % 61) - 30));
    }
    pool.push(await sharp(data, { raw: info }).jpeg({ quality: 95 }).toBuffer());
  }
  return pool;
}
