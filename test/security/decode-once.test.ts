import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { embedImage } from '../../images/embedding.ts';
import { billedSize } from '../../vendors/resize.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Decode amplification, the other half: an accepted image was decoded at intake, again for the
 * embedding, and again by every vendor attempt (3 attempts × 3 vendors in a full fallback), each
 * decode of the full original. Now intake's one decode yields the fingerprint and the embedding,
 * and the worker decodes the original into a work copy (at most 2048 px) at the size the vendor
 * asked bills, which every attempt prepares its upload from: one decode per analysis unless it
 * falls back to a vendor billing a larger size, which decodes once more at its own size
 * (docs/decisions.md, "The work copy's size"). Retries never decode again.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => {
  await p?.close();
});

async function workCopyLookups(): Promise<Record<string, number>> {
  const { values } = await p.worker!.metrics.workCopies.get();
  return Object.fromEntries(values.map((v) => [String(v.labels.outcome), v.value]));
}

describe('one decode of the original per analysis, and one more per fallback to a vendor billing more', () => {
  it('two vendors failing every attempt, the third answering: the 12 MP original is decoded once per vendor, each billing more than the one before, never per attempt; each upload is the size the vendor bills', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const original = photoBytes('mobile-jolla.jpg'); // 3264×2448
    const before = await workCopyLookups();
    p.sim.setBehaviour('openai', { failRate: 1, failure: 'http500' });
    p.sim.setBehaviour('anthropic', { failRate: 1, failure: 'http500' });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageBase64: original.toString('base64'), modules: ['dating', 'describe'], options: { includeEmbedding: true } },
    });
    const stats = p.sim.stats();
    p.sim.reset();
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();

    const attempts = stats.openai.calls + stats.anthropic.calls + stats.google.calls;
    expect(stats.openai.calls).toBeGreaterThanOrEqual(2); // retried, then fell back
    expect(stats.anthropic.calls).toBeGreaterThanOrEqual(2);
    expect(stats.google.succeeded).toBeGreaterThanOrEqual(1);
    // OpenAI bills it 1024×768, Anthropic 1267×950, Google 1536×1152: each fallback decodes again.
    expect([billedSize('openai', 3264, 2448).width, billedSize('anthropic', 3264, 2448).width, billedSize('google', 3264, 2448).width]).toEqual([1024, 1267, 1536]);
    const after = await workCopyLookups();
    expect((after.decoded ?? 0) - (before.decoded ?? 0)).toBe(3);
    expect((after.reused ?? 0) - (before.reused ?? 0)).toBe(attempts - 3);
    expect(stats.google.last?.images.map((im) => ({ width: im.width, height: im.height }))).toEqual([billedSize('google', 3264, 2448)]);

    // The embedding came from intake's decode and is the image's own.
    expect(body.embedding).toEqual(await embedImage(original));
    expect(await getBalance(p.db, user.userId)).toMatchObject({ reserved: 0 });
  }, 90_000);
});
