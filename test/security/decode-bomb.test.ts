import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { MAX_PIXELS_PER_BYTE, probeImage } from '../../images/probe.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Decode amplification: a file of a few kilobytes whose header claims 10,000 × 10,000 pixels. Before:
 * accepted by the header check (at the 100 M pixel cap) and decoded at intake and again for every
 * vendor attempt, each decode about a gigabyte and seconds of CPU. Now refused from its header,
 * before any decode, as over MAX_PIXELS_PER_BYTE.
 */

/** A real 64×64 progressive JPEG whose frame header is patched to claim `width` × `height`. */
async function claimingJpeg(width: number, height: number): Promise<Buffer> {
  const jpeg = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#3366aa' } }).jpeg({ progressive: true }).toBuffer();
  const out = Buffer.from(jpeg);
  for (let i = 2; i < out.length - 9; i++) {
    // SOF0/SOF2 marker: FF C0|C2, length (2), precision (1), height (2), width (2).
    if (out[i] === 0xff && (out[i + 1] === 0xc0 || out[i + 1] === 0xc2)) {
      out.writeUInt16BE(height, i + 5);
      out.writeUInt16BE(width, i + 7);
      return out;
    }
  }
  throw new Error('no frame header found');
}

let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => {
  await p?.close();
});

describe('decompression bombs under the pixel cap', () => {
  it('a few kilobytes claiming 10,000² pixels are refused from the header', async () => {
    const bomb = await claimingJpeg(10_000, 10_000);
    expect(bomb.length).toBeLessThan(10_000);
    expect((10_000 * 10_000) / bomb.length).toBeGreaterThan(MAX_PIXELS_PER_BYTE);
    await expect(probeImage(bomb, { maxPixels: 100_000_000 })).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE', message: expect.stringMatching(/decompression bomb/) });
  });

  it('analyze answers 422 IMAGE_TOO_LARGE and moves nothing', async () => {
    const user = await createTestAccount(p.db, { community: 5 });
    const bomb = await claimingJpeg(10_000, 10_000);
    const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageBase64: bomb.toString('base64'), modules: ['dating'] } });
    expect(res.statusCode, res.body).toBe(422);
    expect(expectEnvelope(res.json()).code).toBe('IMAGE_TOO_LARGE');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
    expect(p.sim.stats().openai.calls).toBe(0);
  });

  it('large real images far below the ratio still pass (a flat 4000×3000 PNG, the most compressible photo-sized file)', async () => {
    const flat = await sharp({ create: { width: 4000, height: 3000, channels: 3, background: '#808080' } }).png().toBuffer();
    expect((4000 * 3000) / flat.length).toBeLessThan(MAX_PIXELS_PER_BYTE);
    await expect(probeImage(flat, { maxPixels: 100_000_000, decode: false })).resolves.toMatchObject({ width: 4000, height: 3000 });
  });
});
