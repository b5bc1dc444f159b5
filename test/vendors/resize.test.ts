import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../core/errors.ts';
import { billedSize, copyServes, imageTokens, makeWorkCopy, orientedSize, prepareImage } from '../../vendors/resize.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { photo, syntheticJpeg } from './fixtures.ts';

const VENDORS = ['openai', 'anthropic', 'google'] as const;

describe('billedSize: the size each vendor processes and bills', () => {
  it.each([
    // OpenAI high detail: fit in 2048², then shortest side 768.
    ['openai', 4000, 3000, 1024, 768],
    ['openai', 3000, 4000, 768, 1024],
    ['openai', 4032, 2012, 1539, 768],
    // Anthropic: long edge ≤ 1568 and ≤ 1.15 MP (Anthropic's own table lists ~1268×951 for 4:3).
    ['anthropic', 4000, 3000, 1267, 950],
    ['anthropic', 3000, 4000, 950, 1267],
    ['anthropic', 4032, 2012, 1554, 775],
    ['anthropic', 2000, 400, 1568, 313],
    // Gemini: our cap of 2×2 tiles of 768 (long edge 1536).
    ['google', 4000, 3000, 1536, 1152],
    ['google', 3000, 4000, 1152, 1536],
  ] as const)('%s %i×%i → %i×%i', (vendor, w, h, ew, eh) => {
    expect(billedSize(vendor, w, h)).toEqual({ width: ew, height: eh });
  });

  it('never upscales a small image', () => {
    for (const vendor of VENDORS) expect(billedSize(vendor, 100, 68)).toEqual({ width: 100, height: 68 });
  });

  it('is idempotent: a prepared image is billed at its own size (so the sim and the adapter agree)', () => {
    for (const vendor of VENDORS) {
      for (let w = 50; w <= 6000; w += 397) {
        for (let h = 50; h <= 6000; h += 451) {
          const once = billedSize(vendor, w, h);
          expect(billedSize(vendor, once.width, once.height), `${vendor} ${w}x${h}`).toEqual(once);
        }
      }
    }
  });

  it('keeps Anthropic under both of its limits', () => {
    for (let w = 100; w <= 8000; w += 271) {
      for (let h = 100; h <= 8000; h += 313) {
        const s = billedSize('anthropic', w, h);
        expect(Math.max(s.width, s.height)).toBeLessThanOrEqual(1568);
        expect(s.width * s.height).toBeLessThanOrEqual(1.15 * 1024 * 1024);
      }
    }
  });
});

describe('imageTokens: the vendors\' published formulas', () => {
  it('OpenAI: 85 + 170 per 512-px tile', () => {
    expect(imageTokens('openai', 1024, 768)).toBe(85 + 170 * 4);
    expect(imageTokens('openai', 512, 512)).toBe(85 + 170);
    expect(imageTokens('openai', 513, 512)).toBe(85 + 170 * 2);
  });
  it('Anthropic: ceil(w·h / 750)', () => {
    expect(imageTokens('anthropic', 1092, 1092)).toBe(Math.ceil((1092 * 1092) / 750));
    expect(imageTokens('anthropic', 200, 200)).toBe(54);
  });
  it('Gemini: 258 when both sides ≤ 384, else 258 per 768-px tile', () => {
    expect(imageTokens('google', 384, 384)).toBe(258);
    expect(imageTokens('google', 385, 100)).toBe(258);
    expect(imageTokens('google', 1536, 1152)).toBe(258 * 4);
    expect(imageTokens('google', 769, 768)).toBe(258 * 2);
  });
});

describe('prepareImage', () => {
  it.each(VENDORS)('%s: a 4000×3000 photo is uploaded at exactly the billed size, as JPEG', async (vendor) => {
    const prepared = await prepareImage(vendor, await syntheticJpeg(4000, 3000));
    const expected = billedSize(vendor, 4000, 3000);
    const meta = await sharp(prepared.data).metadata();
    expect({ width: meta.width, height: meta.height, format: meta.format }).toEqual({ ...expected, format: 'jpeg' });
    expect({ width: prepared.width, height: prepared.height }).toEqual(expected);
    expect(prepared.tokens).toBe(imageTokens(vendor, expected.width, expected.height));
    expect(prepared.source).toEqual({ width: 4000, height: 3000 });
  });

  it.each(VENDORS)('%s: an EXIF-rotated portrait photo comes out portrait (auto-orientation)', async (vendor) => {
    // Stored 2048×1536 landscape with EXIF orientation 6: shown (and analysed) as 1536×2048.
    const input = photo('hdr-canon_hdr_NO.jpg');
    const raw = await sharp(input).metadata();
    expect({ w: raw.width, h: raw.height, o: raw.orientation }).toEqual({ w: 2048, h: 1536, o: 6 });

    const prepared = await prepareImage(vendor, input);
    expect(prepared.source).toEqual({ width: 1536, height: 2048 });
    const out = await sharp(prepared.data).metadata();
    expect(out.height).toBeGreaterThan(out.width);
    expect({ width: out.width, height: out.height }).toEqual(billedSize(vendor, 1536, 2048));
    // The pixels are rotated, not tagged: no orientation left for the vendor to misread.
    expect(out.orientation ?? 1).toBe(1);
  });

  it('applies every EXIF orientation variant of the same scene the same way', async () => {
    const l1 = await orientedSize(photo('orientation-landscape_1.jpg'));
    const l6 = await orientedSize(photo('orientation-landscape_6.jpg'));
    expect(l6).toEqual(l1);
    expect(await orientedSize(photo('orientation-portrait_8.jpg'))).toEqual({ width: 450, height: 600 });
  });

  it('strips metadata: a GPS-tagged photo reaches the vendor without EXIF', async () => {
    const input = photo('gps-DSCN0010.jpg');
    expect((await sharp(input).metadata()).exif).toBeDefined();
    const prepared = await prepareImage('openai', input);
    expect((await sharp(prepared.data).metadata()).exif).toBeUndefined();
  });

  it('re-encodes other formats (TIFF) to JPEG', async () => {
    const prepared = await prepareImage('google', photo('tiff-Arbitro.tiff'));
    expect(prepared.mimeType).toBe('image/jpeg');
    expect((await sharp(prepared.data).metadata()).format).toBe('jpeg');
    expect({ width: prepared.width, height: prepared.height }).toEqual({ width: 174, height: 38 });
  });

  it('rejects bytes that are not an image with IMAGE_INVALID (not a vendor failure)', async () => {
    const err = await prepareImage('anthropic', Buffer.from('definitely not an image')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('IMAGE_INVALID');
    expect((err as AppError).retryable).toBe(false);
  });
});

describe("work copies: the original decoded at the vendor's billed size, every upload prepared from a copy", () => {
  it("a copy is upright, at its vendor's billed size; it gives that vendor the original's own upload, and every vendor billing no more its size and tokens", async () => {
    const inputs = [await syntheticJpeg(4032, 3024, 40), await syntheticJpeg(3000, 4000, 90), photo('mobile-jolla.jpg'), photo('orientation-portrait_8.jpg'), photo('tiff-Arbitro.tiff')];
    let served = 0;
    let refused = 0;
    for (const input of inputs) {
      const source = await orientedSize(input);
      for (const vendor of VENDORS) {
        const copy = await makeWorkCopy(input, vendor);
        expect(copy.source).toEqual(source);
        expect({ width: copy.width, height: copy.height }).toEqual(billedSize(vendor, source.width, source.height));
        // Its own vendor's upload is the encode of the copy: byte for byte the upload from the original.
        expect((await prepareImage(vendor, copy)).data.equals((await prepareImage(vendor, input)).data)).toBe(true);
        for (const other of VENDORS) {
          if (!copyServes(copy, other)) {
            // A vendor billing more is never sent an upscale of a smaller copy.
            await expect(prepareImage(other, copy)).rejects.toThrow(/smaller than what/);
            refused++;
            continue;
          }
          const [direct, viaCopy] = await Promise.all([prepareImage(other, input), prepareImage(other, copy)]);
          expect({ w: viaCopy.width, h: viaCopy.height, tokens: viaCopy.tokens }).toEqual({ w: direct.width, h: direct.height, tokens: direct.tokens });
          served++;
        }
      }
    }
    // The 4:3 photos' copies serve the vendors billing no more (OpenAI 1024 < Anthropic 1267 < Google 1536 wide), the small ones every vendor.
    expect({ served, refused }).toEqual({ served: 3 * 6 + 2 * 9, refused: 3 * 3 });
  });

  it('which copies serve which vendor: by size, to a pixel of rounding', () => {
    const copy = (vendor: (typeof VENDORS)[number], width: number, height: number) => ({ ...billedSize(vendor, width, height), pixels: Buffer.alloc(0), source: { width, height } });
    // 4032×3024: OpenAI 1024×768, Anthropic 1267×950, Google 1536×1152.
    expect(VENDORS.map((v) => copyServes(copy('google', 4032, 3024), v))).toEqual([true, true, true]);
    expect(VENDORS.map((v) => copyServes(copy('anthropic', 4032, 3024), v))).toEqual([true, true, false]);
    expect(VENDORS.map((v) => copyServes(copy('openai', 4032, 3024), v))).toEqual([true, false, false]);
    // 4000×1000: OpenAI's 2048 fit box is the largest (2048×512 against Google's 1536×384).
    expect(VENDORS.map((v) => copyServes(copy('openai', 4000, 1000), v))).toEqual([true, true, true]);
    expect(VENDORS.map((v) => copyServes(copy('google', 4000, 1000), v))).toEqual([false, false, true]);
    // Never enlarged: every vendor bills a 640×480 photo at its own size, so any copy serves all.
    expect(VENDORS.map((v) => copyServes(copy('openai', 640, 480), v))).toEqual([true, true, true]);
    // A pixel short in one side does not serve: the upload would be an upscale.
    const google = billedSize('google', 4032, 3024);
    expect(copyServes({ ...google, pixels: Buffer.alloc(0), source: { width: 4032, height: 3024 } }, 'google')).toBe(true);
    expect(copyServes({ ...google, width: google.width - 1, pixels: Buffer.alloc(0), source: { width: 4032, height: 3024 } }, 'google')).toBe(false);
    // Sizes a pixel apart by rounding: OpenAI bills a 769×769 photo 768×768, Anthropic and Google
    // 769×769 (Google's tokens 258 at 768 against 1,032 at 769), so OpenAI's copy serves neither.
    expect(VENDORS.map((v) => billedSize(v, 769, 769))).toEqual([{ width: 768, height: 768 }, { width: 769, height: 769 }, { width: 769, height: 769 }]);
    expect(VENDORS.map((v) => copyServes(copy('openai', 769, 769), v))).toEqual([true, false, false]);
    expect(imageTokens('google', 768, 768)).toBeLessThan(imageTokens('google', 769, 769));
  });

  it('one decode per image however many lookups for one vendor, concurrent ones included; a failed decode is not kept', async () => {
    const reads: string[] = [];
    const outcomes: string[] = [];
    const bytes: Record<string, Buffer> = { a: await syntheticJpeg(3000, 2000, 10), bad: Buffer.from('not an image') };
    const copies = createWorkCopies({ read: async (sha) => (reads.push(sha), bytes[sha]!), maxBytes: 64 << 20, maxPixels: 100_000_000, onLookup: (o) => outcomes.push(o) });
    const got = await Promise.all(Array.from({ length: 9 }, () => copies.get('a', 'openai')));
    expect(new Set(got).size).toBe(1);
    expect(reads).toEqual(['a']);
    expect(outcomes.filter((o) => o === 'decoded')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'reused')).toHaveLength(8);
    await expect(copies.get('bad', 'openai')).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    await expect(copies.get('bad', 'google')).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    expect(reads).toEqual(['a', 'bad', 'bad']);
  });

  it('is bounded by bytes: the least recently used copy is dropped and decoded again when asked for', async () => {
    const reads: string[] = [];
    const bytes: Record<string, Buffer> = { a: await syntheticJpeg(2000, 1500, 10), b: await syntheticJpeg(2000, 1500, 200) };
    const one = (await makeWorkCopy(bytes.a!, 'openai')).pixels.length;
    const copies = createWorkCopies({ read: async (sha) => (reads.push(sha), bytes[sha]!), maxBytes: Math.ceil(one * 1.5), maxPixels: 100_000_000 });
    await copies.get('a', 'openai');
    await copies.get('b', 'openai');
    await copies.get('a', 'openai');
    expect(reads).toEqual(['a', 'b', 'a']);
  });
});
