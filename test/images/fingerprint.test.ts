import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { fingerprint, hammingDistance } from '../../images/fingerprint.ts';
import { probeImage } from '../../images/probe.ts';
import { photo } from './photos.ts';

describe('fingerprint known answers', () => {
  // Computed once with sharp 0.35.5 / libvips 8.18.7 and pinned: a change here changes every
  // stored pHash/dHash in the registry, so it must be deliberate.
  it.each([
    ['Canon_40D.jpg', { sha256: '6bfdabd4fc33d112283c147acccc574e770bbe6fbdbc3d4da968ba7b606ecc2f', pHash: 'd25725691b24c4bf', dHash: '45587cf471b38b98', width: 100, height: 68 }],
    ['gps-DSCN0010.jpg', { sha256: '17307b1207eb6487d7908e9d154890b46e3d2e0192369cfd3f4c33d5a5af4035', pHash: 'cedbd81c49eaf808', dHash: '313c156666e4e584', width: 640, height: 480 }],
    // EXIF orientation 6: hashed and measured upright.
    ['hdr-canon_hdr_NO.jpg', { sha256: 'fa2127ebab1b3930c998ab262795044262f41dda7eaf0f7a21a773cff48c8696', pHash: '98e976b2e41b19a9', dHash: '9be4b1b2a2b8d919', width: 1536, height: 2048 }],
  ])('%s', async (name, expected) => {
    const bytes = photo(name);
    expect(await fingerprint(bytes)).toEqual(expected);
    expect(expected.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  it('hashes a flat picture to its DC bit alone (tests-67-0_length_string.jpg is one grey field)', async () => {
    expect(await fingerprint(photo('tests-67-0_length_string.jpg'))).toMatchObject({ pHash: '8000000000000000', dHash: '0000000000000000' });
  });

  it('reports the same upright size as probeImage for every accepted shared photo', async () => {
    for (const name of ['orientation-landscape_6.jpg', 'orientation-portrait_8.jpg', 'tiff-Arbitro.tiff', 'mobile-jolla.jpg']) {
      const bytes = photo(name);
      const [fp, probed] = await Promise.all([fingerprint(bytes), probeImage(bytes, { maxPixels: 100_000_000 })]);
      expect({ name, width: fp.width, height: fp.height }).toEqual({ name, width: probed.width, height: probed.height });
    }
  });
});

describe('fingerprint after EXIF auto-orientation', () => {
  it('hashes orientation-landscape_1 and _6 (same scene, stored rotated + tag 6) alike, and portrait_8 (another scene) far away', async () => {
    const [l1, l6, p8] = await Promise.all(['orientation-landscape_1.jpg', 'orientation-landscape_6.jpg', 'orientation-portrait_8.jpg'].map((n) => fingerprint(photo(n))));
    expect(hammingDistance(l1!.pHash, l6!.pHash)).toBeLessThanOrEqual(2);
    expect(hammingDistance(l1!.dHash, l6!.dHash)).toBeLessThanOrEqual(2);
    expect(hammingDistance(l1!.pHash, p8!.pHash)).toBeGreaterThan(10);
    expect([l1!.width, l1!.height, l6!.width, l6!.height, p8!.width, p8!.height]).toEqual([600, 450, 600, 450, 450, 600]);
  });

  it('uses the orientation tag: rotated pixels hash far away, the same pixels tagged back upright hash alike', async () => {
    const original = photo('gps-DSCN0010.jpg');
    const base = await fingerprint(original);
    const rotatedPixels = await sharp(original).rotate(90).jpeg({ quality: 90 }).toBuffer();
    const taggedUpright = await sharp(original).rotate(90).withMetadata({ orientation: 8 }).jpeg({ quality: 90 }).toBuffer();
    expect(hammingDistance(base.pHash, (await fingerprint(rotatedPixels)).pHash)).toBeGreaterThan(10);
    const tagged = await fingerprint(taggedUpright);
    expect(hammingDistance(base.pHash, tagged.pHash)).toBeLessThanOrEqual(3);
    expect([tagged.width, tagged.height]).toEqual([640, 480]);
  });
});

describe('fingerprint similarity', () => {
  it.each(['Canon_40D.jpg', 'gps-DSCN0010.jpg', 'mobile-jolla.jpg', 'hdr-canon_hdr_NO.jpg'])(
    'a half-size quality-70 re-encode of %s stays within pHash distance 5',
    async (name) => {
      const bytes = photo(name);
      const { width } = await fingerprint(bytes);
      const copy = await sharp(bytes).autoOrient().resize(Math.round(width / 2)).jpeg({ quality: 70 }).toBuffer();
      const [a, b] = await Promise.all([fingerprint(bytes), fingerprint(copy)]);
      expect(a.sha256).not.toBe(b.sha256);
      expect(hammingDistance(a.pHash, b.pHash)).toBeLessThanOrEqual(5);
      expect(hammingDistance(a.dHash, b.dHash)).toBeLessThanOrEqual(5);
    },
  );

  it('keeps the same picture alike across PNG 16-bit, CMYK JPEG, WebP and a transparent PNG', async () => {
    const source = photo('gps-DSCN0010.jpg');
    const base = await fingerprint(source);
    const variants = await Promise.all([
      sharp(source).toColourspace('rgb16').png().toBuffer(),
      sharp(source).toColourspace('cmyk').jpeg().toBuffer(),
      sharp(source).webp({ quality: 60 }).toBuffer(),
      sharp(source).ensureAlpha(0.5).png().toBuffer(),
    ]);
    for (const v of variants) expect(hammingDistance(base.pHash, (await fingerprint(v)).pHash)).toBeLessThanOrEqual(5);
  });

  it('keeps different photos more than 10 apart', async () => {
    const names = ['Canon_40D.jpg', 'Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0010.jpg', 'gps-DSCN0012.jpg', 'gps-DSCN0021.jpg', 'mobile-jolla.jpg', 'xmp-no_exif.jpg'];
    const fps = await Promise.all(names.map((n) => fingerprint(photo(n))));
    for (let i = 0; i < fps.length; i++) {
      for (let j = i + 1; j < fps.length; j++) {
        expect({ pair: `${names[i]} ~ ${names[j]}`, far: hammingDistance(fps[i]!.pHash, fps[j]!.pHash) > 10 }).toEqual({ pair: `${names[i]} ~ ${names[j]}`, far: true });
      }
    }
  });

  it('measures the HDR pair (one scene, HDR off/on, handheld): pHash 16, dHash 10 apart', async () => {
    // Above the default lookup threshold of 5: an HDR variant does not fuzzy-match its original.
    const [off, on] = await Promise.all([fingerprint(photo('hdr-canon_hdr_NO.jpg')), fingerprint(photo('hdr-canon_hdr_YES.jpg'))]);
    expect(hammingDistance(off.pHash, on.pHash)).toBe(16);
    expect(hammingDistance(off.dHash, on.dHash)).toBe(10);
  });

  it('rejects bytes that do not decode as IMAGE_INVALID (non-retryable), not a raw sharp error', async () => {
    await expect(fingerprint(Buffer.from('not an image'))).rejects.toMatchObject({ code: 'IMAGE_INVALID', retryable: false });
  });
});
