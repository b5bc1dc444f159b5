import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { planVendorCall } from '../../activities/vendor-call.ts';
import { loadConfig, type VendorName } from '../../core/config.ts';
import { resolveLenses } from '../../lenses/resolve.ts';
import { startSimVendor, type SimVendor } from '../../tools/sim/index.ts';
import { createVisionClients, type VisionClient } from '../../vendors/index.ts';
import { fixedPrefix, promptCacheKey } from '../../vendors/prompt-cache.ts';
import type { VendorCallInput } from '../../workflows/types.ts';
import { photo } from './fixtures.ts';

/**
 * The vendor prompt's fixed part (instructions and lens schemas) is one stable prefix, the photo
 * comes after it, and the caching hint rides along: proved on the prompt we plan and at the wire,
 * where the simulated vendor sees what the real SDK sent and bills cached tokens like the vendor.
 */

const VENDORS: readonly VendorName[] = ['openai', 'anthropic', 'google'];
const FULL = resolveLenses({ preset: 'full-analysis' }).lenses;
const PHOTO_A = photo('gps-DSCN0012.jpg');
const PHOTO_B = photo('Canon_40D.jpg');

const planned = (over: Partial<VendorCallInput> = {}) =>
  planVendorCall({ userId: 'usr_alice', sha256: 'a'.repeat(64), task: { kind: 'lenses', lenses: FULL }, stack: 'full-analysis', ...over });

describe('the fixed prefix of a lens prompt', () => {
  it('is byte-identical for two photos of two accounts asked the same lenses, whatever their caller data; no photo, account, request or time data in it', () => {
    const a = planned();
    const b = planned({
      userId: 'usr_bob',
      sha256: 'b'.repeat(64),
      context: { customInstructions: 'Focus on the red car.', knownPeople: [{ name: 'Ada Example' }] },
      moduleOptions: { dating: { hint: 'option-marker-9137' } },
    });
    expect(fixedPrefix(b)).toBe(fixedPrefix(a));
    expect(promptCacheKey(b)).toBe(promptCacheKey(a));
    // The caller's data is in the user turn, after the prefix.
    expect(b.prompt).toContain('Focus on the red car.');
    const prefix = fixedPrefix(a) + fixedPrefix(b);
    for (const leak of ['usr_alice', 'usr_bob', 'a'.repeat(64), 'b'.repeat(64), 'Focus on the red car', 'Ada Example', 'option-marker-9137']) {
      expect(prefix).not.toContain(leak);
    }
    expect(prefix).not.toMatch(/\b20\d\d-\d\d-\d\d|\d\d:\d\d:\d\d|req_[A-Za-z0-9]/);
    // Planning again later gives the same bytes: nothing in it moves with time.
    expect(fixedPrefix(planned())).toBe(fixedPrefix(a));
  });

  it('another lens set is another prefix and another cache key', () => {
    const other = planned({ task: { kind: 'lenses', lenses: ['moderation', 'dating'] } });
    expect(fixedPrefix(other)).not.toBe(fixedPrefix(planned()));
    expect(promptCacheKey(other)).not.toBe(promptCacheKey(planned()));
    expect(promptCacheKey(other)).toMatch(/^lenstack-[0-9a-f]{32}$/);
  });
});

let sim: SimVendor;
const clientsFor = (promptCache: 'on' | 'off') =>
  Object.fromEntries(
    createVisionClients(loadConfig({ SIM_VENDOR_URL: sim.url, VENDOR_PROMPT_CACHE: promptCache })).clients.map((c) => [c.vendor, c]),
  ) as Record<VendorName, VisionClient>;

beforeAll(async () => {
  sim = await startSimVendor({ seed: 'prompt-cache-adapters' });
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => sim.reset());

const HINT: Record<VendorName, string | null> = { openai: promptCacheKey(planned()), anthropic: 'cache_control', google: null };

async function analyzeBoth(client: VisionClient) {
  const call = planned();
  const ask = (image: Buffer) => client.analyze({ image, system: call.system, prompt: call.prompt, schemaName: call.schemaName, jsonSchema: call.jsonSchema });
  const first = await ask(PHOTO_A);
  const wireA = sim.stats()[client.vendor].last!;
  const second = await ask(PHOTO_B);
  const wireB = sim.stats()[client.vendor].last!;
  return { first, second, wireA, wireB };
}

describe.each(VENDORS)('%s: the real SDK at the wire', (vendor) => {
  it('sends the fixed prefix first, the same bytes for two photos, the photo after it, with the caching hint; the second photo bills cached input', async () => {
    const { first, second, wireA, wireB } = await analyzeBoth(clientsFor('on')[vendor]);
    const at = wireA.segments.findIndex((s) => s.kind === 'image');
    expect(at).toBeGreaterThan(0);
    expect(wireB.segments.findIndex((s) => s.kind === 'image')).toBe(at);
    // Everything before the photo hashes the same; from the photo on it differs.
    expect(wireB.segments[at - 1]!.prefixHash).toBe(wireA.segments[at - 1]!.prefixHash);
    expect(wireB.segments[at]!.prefixHash).not.toBe(wireA.segments[at]!.prefixHash);
    // Instructions and schemas of full-analysis: above every vendor's 1024-token minimum.
    expect(wireA.segments.slice(0, at).reduce((n, s) => n + s.tokens, 0)).toBeGreaterThan(1024);
    if (vendor === 'anthropic') {
      // The breakpoint closes tools + system; the user turn (photo, then the task) follows it.
      expect(wireA.segments.findIndex((s) => s.breakpoint)).toBe(at - 1);
    } else {
      expect(at).toBe(wireA.segments.length - 1);
    }
    expect(wireA.cacheHint).toBe(HINT[vendor]);
    expect(wireB.cacheHint).toBe(HINT[vendor]);

    expect(first.cachedInputTokens).toBe(0);
    expect(second.cachedInputTokens).toBe(wireB.cachedTokens);
    expect(second.cachedInputTokens).toBeGreaterThan(1024);
    expect(second.inputTokens).toBe(wireB.inputTokens);
    expect(first.cacheWriteInputTokens).toBe(vendor === 'anthropic' ? second.cachedInputTokens : 0);
    expect(second.cacheWriteInputTokens).toBe(0);
  });

  it('VENDOR_PROMPT_CACHE=off: no hint on the wire; Anthropic then caches nothing, OpenAI and Gemini still cache on their own; the input billed is the same', async () => {
    const on = await analyzeBoth(clientsFor('on')[vendor]);
    sim.reset();
    const off = await analyzeBoth(clientsFor('off')[vendor]);
    expect(off.wireA.cacheHint).toBeNull();
    expect(off.wireB.cacheHint).toBeNull();
    expect(off.wireB.segments.map((s) => s.prefixHash)).toEqual(on.wireB.segments.map((s) => s.prefixHash));
    if (vendor === 'anthropic') expect(off.second.cachedInputTokens + off.first.cacheWriteInputTokens).toBe(0);
    else expect(off.second.cachedInputTokens).toBe(on.second.cachedInputTokens);
    expect([off.first.inputTokens, off.second.inputTokens]).toEqual([on.first.inputTokens, on.second.inputTokens]);
  });
});
