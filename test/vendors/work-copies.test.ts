import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { estimateCallTokens } from '../../activities/vendors.ts';
import { decodeCheckedHashes } from '../../images/intake.ts';
import { billedSize, imageTokens, prepareImage } from '../../vendors/resize.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { photo } from './fixtures.ts';

/**
 * The work copy is made at the billed size of the vendor asked for (docs/decisions.md, "The work
 * copy's size"): one decode per analysis unless it falls back to a vendor billing a larger size,
 * which decodes the original again at its own size. `onLookup` counts each lookup once, `decoded`
 * or `reused`; `read` counts the reads of the original.
 */

const MAX_PIXELS = 100_000_000;
const SHA = 'a'.repeat(64);

function copiesOf(bytes: Buffer) {
  const reads: string[] = [];
  const outcomes: string[] = [];
  let hashed = 0;
  const copies = createWorkCopies({
    read: async (sha) => (reads.push(sha), bytes),
    maxBytes: 64 << 20,
    maxPixels: MAX_PIXELS,
    hash: (b) => (hashed++, decodeCheckedHashes(b, MAX_PIXELS)),
    onLookup: (o) => outcomes.push(o),
  });
  const count = () => ({ reads: reads.length, decoded: outcomes.filter((o) => o === 'decoded').length, reused: outcomes.filter((o) => o === 'reused').length, hashed });
  return { copies, count };
}

describe('a work copy per vendor asked for', () => {
  // 3264×2448, a phone camera's JPEG: OpenAI bills 1024×768, Anthropic 1267×950, Google 1536×1152.
  const jolla = photo('mobile-jolla.jpg');

  it("a fallback to a vendor billing more decodes again, and its upload is its full billed size from the original, not the smaller copy upscaled; vendors billing less are then served from it", async () => {
    const { copies, count } = copiesOf(jolla);
    const first = await copies.withHashes(SHA, 'openai');
    expect({ width: first.copy.width, height: first.copy.height }).toEqual({ width: 1024, height: 768 });
    expect(count()).toEqual({ reads: 1, decoded: 1, reused: 0, hashed: 1 });
    expect((await prepareImage('openai', first.copy)).data.equals((await prepareImage('openai', jolla)).data)).toBe(true);
    // The copy is too small for Google: it is never upscaled to Google's size.
    await expect(prepareImage('google', first.copy)).rejects.toThrow(/smaller than what google bills/);

    // The fallback: the original read and decoded again, at Google's size, its hashes kept from the first read.
    const fallback = await copies.withHashes(SHA, 'google');
    expect(count()).toEqual({ reads: 2, decoded: 2, reused: 0, hashed: 1 });
    expect(fallback.hashes).toEqual(first.hashes);
    expect({ width: fallback.copy.width, height: fallback.copy.height }).toEqual(billedSize('google', 3264, 2448));
    expect(fallback.copy.pixels.length).toBe(1536 * 1152 * 3);
    const upload = await prepareImage('google', fallback.copy);
    expect({ width: upload.width, height: upload.height, tokens: upload.tokens }).toEqual({ width: 1536, height: 1152, tokens: imageTokens('google', 1536, 1152) });
    expect(upload.data.equals((await prepareImage('google', jolla)).data)).toBe(true);
    // What an upscale of OpenAI's copy would have sent differs from it.
    const upscaled = await sharp(first.copy.pixels, { raw: { width: 1024, height: 768, channels: 3 } }).resize(1536, 1152, { fit: 'fill' }).raw().toBuffer();
    expect(upscaled.equals((await sharp(upload.data).raw().toBuffer()))).toBe(false);

    // Google's copy replaced OpenAI's: OpenAI (a retry) and Anthropic are served from it, resized down, with no read.
    expect(await copies.get(SHA, 'openai')).toBe(fallback.copy);
    expect(await copies.get(SHA, 'anthropic')).toBe(fallback.copy);
    expect(count()).toEqual({ reads: 2, decoded: 2, reused: 2, hashed: 1 });
    const [openai, anthropic] = await Promise.all([prepareImage('openai', fallback.copy), prepareImage('anthropic', fallback.copy)]);
    expect([openai, anthropic].map((u) => [u.width, u.height, u.tokens])).toEqual([
      [1024, 768, imageTokens('openai', 1024, 768)],
      [1267, 950, imageTokens('anthropic', 1267, 950)],
    ]);
  });

  it('each step up decodes once: OpenAI, then Anthropic, then Google (a full fallback) reads the original three times, retries none', async () => {
    const { copies, count } = copiesOf(jolla);
    for (const vendor of ['openai', 'anthropic', 'google'] as const) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const copy = await copies.get(SHA, vendor);
        expect({ vendor, width: copy.width, height: copy.height }).toEqual({ vendor, ...billedSize(vendor, 3264, 2448) });
      }
    }
    expect(count()).toEqual({ reads: 3, decoded: 3, reused: 6, hashed: 0 });
  });

  it('concurrent attempts share the decode in flight; one for a vendor billing more then decodes once more, shared too', async () => {
    const { copies, count } = copiesOf(jolla);
    const [o1, o2, g1, g2] = await Promise.all([copies.get(SHA, 'openai'), copies.get(SHA, 'openai'), copies.get(SHA, 'google'), copies.get(SHA, 'google')]);
    expect(o1).toBe(o2);
    expect(g1).toBe(g2);
    expect([o1.width, g1.width]).toEqual([1024, 1536]);
    expect(count()).toEqual({ reads: 2, decoded: 2, reused: 2, hashed: 0 });
    expect(await copies.get(SHA, 'anthropic')).toBe(g1);
    expect(count()).toEqual({ reads: 2, decoded: 2, reused: 3, hashed: 0 });
  });

  it('two vendors billing the same size share one decode, asked one after the other or at once', async () => {
    // 3072×1536: OpenAI's shortest side of 768 and Google's long side of 1536 meet at 1536×768.
    const wide = await sharp(jolla).resize(3072, 1536, { fit: 'fill' }).jpeg({ quality: 90 }).toBuffer();
    expect(billedSize('openai', 3072, 1536)).toEqual({ width: 1536, height: 768 });
    expect(billedSize('google', 3072, 1536)).toEqual({ width: 1536, height: 768 });

    const one = copiesOf(wide);
    const openai = await one.copies.get(SHA, 'openai');
    expect(await one.copies.get(SHA, 'google')).toBe(openai);
    expect(one.count()).toEqual({ reads: 1, decoded: 1, reused: 1, hashed: 0 });
    const upload = await prepareImage('google', openai);
    expect({ width: upload.width, height: upload.height }).toEqual({ width: 1536, height: 768 });
    expect(upload.data.equals((await prepareImage('google', wide)).data)).toBe(true);

    const both = copiesOf(wide);
    const [g, o] = await Promise.all([both.copies.get(SHA, 'google'), both.copies.get(SHA, 'openai')]);
    expect(g).toBe(o);
    expect(both.count()).toEqual({ reads: 1, decoded: 1, reused: 1, hashed: 0 });
  });

  it('sizes a pixel apart by rounding: OpenAI\'s 768×768 copy of a 769×769 photo serves neither Anthropic nor Google, and the budget bills Google by the original', async () => {
    const square = await sharp(jolla).resize(769, 769, { fit: 'fill' }).jpeg({ quality: 90 }).toBuffer();
    const { copies, count } = copiesOf(square);
    const openai = await copies.get(SHA, 'openai');
    expect([openai.width, openai.height]).toEqual([768, 768]);
    // The budget's estimate for Google is the same from OpenAI's copy as from Google's own: 769×769.
    const googleTokens = estimateCallTokens('google', openai, '');
    const google = await copies.get(SHA, 'google');
    expect([google.width, google.height]).toEqual([769, 769]);
    expect(count()).toEqual({ reads: 2, decoded: 2, reused: 0, hashed: 0 });
    expect(estimateCallTokens('google', google, '')).toBe(googleTokens);
    const upload = await prepareImage('google', google);
    expect([upload.width, upload.height, upload.tokens]).toEqual([769, 769, imageTokens('google', 769, 769)]);
    expect(upload.data.equals((await prepareImage('google', square)).data)).toBe(true);
    expect(googleTokens - estimateCallTokens('openai', openai, '')).toBe(imageTokens('google', 769, 769) - imageTokens('openai', 768, 768));
  });

  it('a refresh that fails leaves the smaller copy kept: the vendor it served is still served, with no read', async () => {
    let reads = 0;
    const copies = createWorkCopies({
      read: async () => {
        if (++reads > 1) throw new Error('blob store unreachable');
        return jolla;
      },
      maxBytes: 64 << 20,
      maxPixels: MAX_PIXELS,
    });
    const openai = await copies.get(SHA, 'openai');
    await expect(copies.get(SHA, 'google')).rejects.toThrow('blob store unreachable');
    expect(await copies.get(SHA, 'openai')).toBe(openai);
    expect(reads).toBe(2);
  });

  it('copyThenHashes answers with the copy while the hashes are still being made (a vendor call is sent meanwhile), from the same read', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let hashed = 0;
    let reads = 0;
    const copies = createWorkCopies({
      read: async () => (reads++, jolla),
      maxBytes: 64 << 20,
      maxPixels: MAX_PIXELS,
      hash: async (b) => {
        hashed++;
        await gate;
        return decodeCheckedHashes(b, MAX_PIXELS);
      },
    });
    const { copy, hashes } = await copies.copyThenHashes(SHA, 'openai');
    expect([copy.width, copy.height]).toEqual([1024, 768]);
    let done = false;
    void hashes.then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    release();
    expect(await hashes).toEqual(await decodeCheckedHashes(jolla, MAX_PIXELS));
    // One read and one hashing served both; asking again reads nothing more.
    expect(await copies.withHashes(SHA, 'openai')).toEqual({ copy, hashes: await hashes });
    expect({ reads, hashed }).toEqual({ reads: 1, hashed: 1 });
  });

  it('hashes that fail after the copy was made reject only when awaited, never as an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      const copies = createWorkCopies({ read: async () => jolla, maxBytes: 64 << 20, maxPixels: MAX_PIXELS, hash: async () => Promise.reject(new Error('no fingerprint')) });
      // A caller that stops before awaiting them (its vendor call failed): nothing escapes, whether
      // the hashing was started by the copy's read or, the copy made before without them, alone.
      await copies.get(SHA, 'openai');
      await copies.copyThenHashes(SHA, 'openai');
      const { hashes } = await copies.copyThenHashes('b'.repeat(64), 'openai');
      // Node reports an unhandled rejection once the microtasks of the turn are done.
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
      await expect(hashes).rejects.toThrow('no fingerprint');
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
