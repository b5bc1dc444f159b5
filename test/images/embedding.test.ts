import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { EMBEDDING_DIMENSIONS, embedImage } from '../../images/embedding.ts';
import { photoBytes } from '../helpers/photos.ts';

const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

describe('embedImage', () => {
  it('is a deterministic, unit-length vector of 192 numbers', async () => {
    const a = await embedImage(photoBytes('gps-DSCN0010.jpg'));
    const b = await embedImage(photoBytes('gps-DSCN0010.jpg'));
    expect(a).toHaveLength(EMBEDDING_DIMENSIONS);
    expect(a).toEqual(b);
    expect(Math.hypot(...a)).toBeCloseTo(1, 4);
  });

  it('scores a re-encoded, resized copy far closer than a different photo', async () => {
    const original = photoBytes('gps-DSCN0010.jpg');
    const copy = await sharp(original).resize(320).jpeg({ quality: 60 }).toBuffer();
    const [e0, e1, other1, other2] = await Promise.all([
      embedImage(original),
      embedImage(copy),
      embedImage(photoBytes('xmp-BlueSquare.jpg')),
      embedImage(photoBytes('Canon_40D.jpg')),
    ]);
    expect(cosine(e0, e1)).toBeGreaterThan(0.95);
    expect(cosine(e0, other1)).toBeLessThan(0.85);
    expect(cosine(e0, other2)).toBeLessThan(0.9);
  });

  it('applies EXIF orientation first: the same scene stored rotated embeds alike', async () => {
    const [a, b] = await Promise.all([embedImage(photoBytes('orientation-landscape_1.jpg')), embedImage(photoBytes('orientation-landscape_6.jpg'))]);
    expect(cosine(a, b)).toBeGreaterThan(0.95);
  });
});
