import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig, type VendorName } from '../../core/config.ts';
import { startSimVendor, type SimVendor } from '../../tools/sim/index.ts';
import { createVendorClient, createVisionClients, simBaseURL, VendorError, type VisionClient, type VisionRequest } from '../../vendors/index.ts';
import { billedSize, imageTokens, orientedSize } from '../../vendors/resize.ts';
import type { AdapterOptions } from '../../vendors/answer.ts';
import { conforms, HAND_SCHEMA, lensLikeSchema, photo } from './fixtures.ts';

/**
 * The three adapters through their REAL SDKs, over HTTP, against the simulated vendor: what the
 * SDK sends is what the sim parses, what the sim answers is what the SDK parses.
 */

const VENDORS: readonly VendorName[] = ['openai', 'anthropic', 'google'];
const FACTORY: Record<VendorName, (o: AdapterOptions) => VisionClient> = {
  openai: (o) => createVendorClient('openai', o),
  anthropic: (o) => createVendorClient('anthropic', o),
  google: (o) => createVendorClient('google', o),
};
const MODELS: Record<VendorName, string> = { openai: 'gpt-test-mini', anthropic: 'claude-test', google: 'gemini-test-flash' };

let sim: SimVendor;
let clients: Record<VendorName, VisionClient>;

beforeAll(async () => {
  sim = await startSimVendor({ seed: 'adapter-tests' });
  const config = loadConfig({
    SIM_VENDOR_URL: sim.url,
    OPENAI_MODEL: MODELS.openai,
    ANTHROPIC_MODEL: MODELS.anthropic,
    GEMINI_MODEL: MODELS.google,
  });
  const built = createVisionClients(config);
  clients = Object.fromEntries(built.clients.map((c) => [c.vendor, c])) as Record<VendorName, VisionClient>;
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => {
  sim.reset();
});

const JOLLA = photo('mobile-jolla.jpg'); // 3264×2448 phone photo
const PORTRAIT = photo('hdr-canon_hdr_NO.jpg'); // stored landscape, EXIF orientation 6 → portrait
/**
 * Image tokens for either photo above, worked by hand from the vendors' published rules (both are
 * 4:3, so each vendor bills the portrait as the landscape turned).
 * OpenAI: 3264×2448 fits 2048 as 2048×1536, short side 768 gives 1024×768: 2×2 tiles of 512, 85 + 170·4.
 * Anthropic: long edge ≤ 1568 and ≈ 1.15 MP gives 1267×950: 1,203,650 / 750, rounded up.
 * Gemini: we send 1536×1152 (our cap): 2×2 tiles of 768, 258 each.
 */
const PUBLISHED_TOKENS: Record<VendorName, number> = { openai: 85 + 170 * 4, anthropic: 1605, google: 258 * 4 };

function request(image: Buffer, jsonSchema: Record<string, unknown> = lensLikeSchema(), extra: Partial<VisionRequest> = {}): VisionRequest {
  return {
    image,
    system: 'You are a careful photo analyst. Answer only with the requested structure.',
    prompt: 'Analyse this photograph.',
    schemaName: 'lenstack_analysis',
    jsonSchema,
    ...extra,
  };
}

async function failureOf(p: Promise<unknown>): Promise<VendorError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(VendorError);
  return err as VendorError;
}

describe.each(VENDORS)('%s adapter → real SDK → sim', (vendor) => {
  it('answers with JSON that conforms to a lens-like schema (nested objects, arrays, enums, nullables, pattern, date)', async () => {
    const schema = lensLikeSchema();
    const result = await clients[vendor].analyze(request(JOLLA, schema));
    const check = conforms(schema, result.json);
    expect(check.errors).toBe('');
    expect(result.json).toMatchObject({ version: 'v1', scene: expect.any(Object), palette: expect.any(Array) });
  });

  it('answers a hand-written schema with type-array and anyOf nullables and nested arrays', async () => {
    const result = await clients[vendor].analyze(request(photo('gps-DSCN0021.jpg'), HAND_SCHEMA));
    expect(conforms(HAND_SCHEMA, result.json).errors).toBe('');
    const objects = (result.json as { objects: unknown[] }).objects;
    expect(objects.length).toBeGreaterThanOrEqual(2);
    expect(objects.length).toBeLessThanOrEqual(4);
  });

  it('labels the answer simulated and reports the model from the response', async () => {
    const result = await clients[vendor].analyze(request(JOLLA));
    expect(result).toMatchObject({ vendor, model: MODELS[vendor], provider: `${vendor} (simulated)`, simulated: true });
    expect(clients[vendor].simulated).toBe(true);
  });

  it.each([
    ['a 3264×2448 phone photo', JOLLA],
    ['an EXIF-rotated portrait photo', PORTRAIT],
  ])('bills %s at the vendor formula for its resized size, plus the prompt text', async (_label, image) => {
    const source = await orientedSize(image);
    const billed = billedSize(vendor, source.width, source.height);
    const result = await clients[vendor].analyze(request(image));

    const last = sim.stats()[vendor].last!;
    // What arrived at the vendor is exactly the billed size, in the photo's display orientation.
    expect(last.images).toHaveLength(1);
    expect({ width: last.images[0]!.width, height: last.images[0]!.height }).toEqual(billed);
    expect(result.image).toEqual({ ...billed, tokens: imageTokens(vendor, billed.width, billed.height) });
    // The sim bills by its own reading of the published rules (tools/sim/billing.ts), so this is
    // our estimate checked against the vendor's figure, and both against the formula by hand.
    expect(last.images[0]!.tokens).toBe(PUBLISHED_TOKENS[vendor]);
    expect(last.imageTokens).toBe(result.image!.tokens);
    // Token counts are read from the vendor's usage fields, not estimated by the adapter.
    expect(last.textTokens).toBeGreaterThan(0);
    expect(result.inputTokens).toBe(last.imageTokens + last.textTokens);
    expect(result.outputTokens).toBe(last.outputTokens);
  });

  it('is deterministic: the same photo and schema give the same answer, a different photo a different one', async () => {
    const a1 = await clients[vendor].analyze(request(JOLLA));
    const a2 = await clients[vendor].analyze(request(JOLLA));
    const b = await clients[vendor].analyze(request(photo('gps-DSCN0010.jpg')));
    expect(a2.json).toEqual(a1.json);
    expect(b.json).not.toEqual(a1.json);
  });

  it('hands an answer outside the schema over as it is: the one validation is the caller\'s', async () => {
    sim.setBehaviour(vendor, { failRate: 1, failure: 'schema-invalid' });
    const schema = lensLikeSchema();
    const result = await clients[vendor].analyze(request(JOLLA, schema));
    expect(conforms(schema, result.json).ok).toBe(false);
    expect(sim.stats()[vendor].failed['schema-invalid']).toBe(1);
  });

  it.each([
    ['http500', 'unavailable', true, 500],
    ['http429', 'unavailable', true, 429],
    ['http400', 'rejected', false, 400],
    ['invalid-json', 'invalid_output', false, undefined],
  ] as const)('maps the %s failure to kind %s (retryable %s), with exactly one HTTP call', async (failure, kind, retryable, status) => {
    sim.setBehaviour(vendor, { failRate: 1, failure });
    const err = await failureOf(clients[vendor].analyze(request(JOLLA)));
    expect({ vendor: err.vendor, kind: err.kind, retryable: err.retryable, status: err.status, aborted: err.aborted }).toEqual({
      vendor,
      kind,
      retryable,
      status,
      aborted: false,
    });
    // No SDK-level retry: Temporal's retry policy is the only one.
    const stats = sim.stats()[vendor];
    expect(stats.calls).toBe(1);
    expect(stats.failed[failure]).toBe(1);
  });

  it('an answer it refuses (not JSON) carries what the vendor billed for it; an HTTP failure carries nothing', async () => {
    sim.setBehaviour(vendor, { failRate: 1, failure: 'invalid-json' });
    const err = await failureOf(clients[vendor].analyze(request(JOLLA)));
    const billed = sim.stats()[vendor].last!;
    expect(err.usage).toMatchObject({ inputTokens: billed.inputTokens, outputTokens: billed.outputTokens, cachedInputTokens: billed.cachedTokens });
    expect(err.usage!.outputTokens).toBeGreaterThan(0);
    sim.setBehaviour(vendor, { failRate: 1, failure: 'http500' });
    expect((await failureOf(clients[vendor].analyze(request(JOLLA)))).usage).toBeUndefined();
  });

  it('a stalled vendor is ended by the caller\'s AbortSignal', async () => {
    sim.setBehaviour(vendor, { failRate: 1, failure: 'stall' });
    const controller = new AbortController();
    const call = clients[vendor].analyze(request(JOLLA, lensLikeSchema(), { signal: controller.signal }));
    // Abort once the sim holds the request (no fixed sleep: wait for the sim to have it).
    await vi.waitFor(() => expect(sim.stats()[vendor].failed.stall).toBe(1), { timeout: 5000, interval: 10 });
    controller.abort();
    const err = await failureOf(call);
    expect({ kind: err.kind, retryable: err.retryable, aborted: err.aborted }).toEqual({ kind: 'unavailable', retryable: true, aborted: true });
    await vi.waitFor(() => expect(sim.stats()[vendor].aborted).toBe(1), { timeout: 5000, interval: 10 });
    expect(sim.stats()[vendor].calls).toBe(1);
  });

  it('an already-aborted signal ends the call before any HTTP request', async () => {
    const controller = new AbortController();
    controller.abort();
    const err = await failureOf(clients[vendor].analyze(request(JOLLA, lensLikeSchema(), { signal: controller.signal })));
    expect({ kind: err.kind, aborted: err.aborted }).toEqual({ kind: 'unavailable', aborted: true });
    expect(sim.stats()[vendor].calls).toBe(0);
  });

  it('the SDK timeout (backstop) surfaces as unavailable, not aborted, without a retry', async () => {
    sim.setBehaviour(vendor, { failRate: 1, failure: 'stall' });
    const client = FACTORY[vendor]({ apiKey: 'k', baseURL: simBaseURL(vendor, sim.url), model: MODELS[vendor], simulated: true, promptCache: true, timeoutMs: 300 });
    const err = await failureOf(client.analyze(request(JOLLA)));
    expect({ kind: err.kind, retryable: err.retryable, aborted: err.aborted }).toEqual({ kind: 'unavailable', retryable: true, aborted: false });
    expect(sim.stats()[vendor].calls).toBe(1);
  });

  it('an unreachable vendor is unavailable and retryable', async () => {
    const closed = await startSimVendor();
    const deadUrl = closed.url;
    await closed.close();
    const client = FACTORY[vendor]({ apiKey: 'k', baseURL: simBaseURL(vendor, deadUrl), model: MODELS[vendor], simulated: true, promptCache: true });
    const err = await failureOf(client.analyze(request(photo('Canon_40D.jpg'))));
    expect({ kind: err.kind, retryable: err.retryable, aborted: err.aborted }).toEqual({ kind: 'unavailable', retryable: true, aborted: false });
  });

  it('labels answers from the sim as simulated even when the client was configured as real', async () => {
    // Someone sets <VENDOR>_API_KEY and points <VENDOR>_BASE_URL at the sim: the sim's header still wins.
    const client = FACTORY[vendor]({ apiKey: 'looks-real', baseURL: simBaseURL(vendor, sim.url), model: MODELS[vendor], simulated: false, promptCache: true });
    expect(client.simulated).toBe(false);
    const result = await client.analyze(request(photo('Canon_40D.jpg')));
    expect({ simulated: result.simulated, provider: result.provider }).toEqual({ simulated: true, provider: `${vendor} (simulated)` });
  });
});

describe('the sim control endpoint changes behaviour at runtime', () => {
  it('POST /__sim/config makes one vendor fail, GET /__sim/stats counts it, POST /__sim/reset heals it', async () => {
    const set = await fetch(`${sim.url}/__sim/config`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ anthropic: { failRate: 1, failure: 'http429' } }),
    });
    expect(set.status).toBe(200);

    const err = await failureOf(clients.anthropic.analyze(request(JOLLA)));
    expect(err.kind).toBe('unavailable');
    // Only the configured vendor changed.
    await expect(clients.openai.analyze(request(JOLLA))).resolves.toMatchObject({ vendor: 'openai' });

    const stats = (await (await fetch(`${sim.url}/__sim/stats`)).json()) as Record<string, { calls: number; failed: Record<string, number> }>;
    expect(stats.anthropic).toMatchObject({ calls: 1, failed: { http429: 1 } });
    expect(stats.openai).toMatchObject({ calls: 1, failed: { http429: 0 } });

    expect((await fetch(`${sim.url}/__sim/reset`, { method: 'POST' })).status).toBe(200);
    await expect(clients.anthropic.analyze(request(JOLLA))).resolves.toMatchObject({ vendor: 'anthropic' });
  });
});
