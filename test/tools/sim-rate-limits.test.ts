import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simOptionsFrom } from '../../tools/sim/cli-options.ts';
import { startSimVendor, type SimVendor } from '../../tools/sim/index.ts';
import { createVendorRateLimit } from '../../tools/sim/rate-limits.ts';
import { prepareImage } from '../../vendors/resize.ts';
import { HAND_SCHEMA, photo } from '../vendors/fixtures.ts';
import { VENDOR_REGISTRY } from '../../vendors/registry.ts';

const toOpenAISchema = VENDOR_REGISTRY.openai.toSchema;

/** The simulator's per-vendor RPM/TPM limits (tools/sim/rate-limits.ts), at the wire and in the window itself. */

let sim: SimVendor;
let jpegBase64: string;

beforeAll(async () => {
  sim = await startSimVendor({ seed: 'limit-tests', limits: { openai: { rpm: 3 } } });
  jpegBase64 = (await prepareImage('openai', photo('gps-DSCN0012.jpg'))).data.toString('base64');
});
afterAll(async () => {
  await sim.close();
});

const openaiCall = () =>
  fetch(`${sim.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer k' },
    body: JSON.stringify({
      model: 'gpt-limit',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${jpegBase64}` } }, { type: 'text', text: 'hi' }] }],
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: toOpenAISchema(HAND_SCHEMA), strict: true } },
    }),
  });

describe('the simulator enforces requests per minute', () => {
  it('answers the call beyond the limit 429 with Retry-After up to the window, in the vendor\'s error format, and counts it apart', async () => {
    sim.reset();
    const statuses: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i < 5; i++) {
      const r = await openaiCall();
      statuses.push(r.status);
      if (r.status === 429) refused ??= r;
      else await r.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const retryAfter = Number(refused!.headers.get('retry-after'));
    const retryAfterMs = Number(refused!.headers.get('retry-after-ms'));
    // The first of the three admitted calls leaves the window a minute after it came.
    expect(retryAfter).toBeGreaterThan(55);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(Math.ceil(retryAfterMs / 1000)).toBe(retryAfter);
    expect(((await refused!.json()) as { error: { type: string } }).error.type).toBeTruthy();
    const stats = sim.stats().openai;
    expect(stats).toMatchObject({ calls: 5, succeeded: 3, rateLimited: 2, failed: { http429: 0 } });
    // Another vendor's limit is its own (none here).
    expect(sim.limits('anthropic')).toEqual({ rpm: 0, tpm: 0 });
  });

  it("Gemini's 429 also says the wait in its body (google.rpc.RetryInfo), as the real API does; OpenAI's does not", async () => {
    sim.reset();
    await fetch(`${sim.url}/__sim/limits`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ all: { rpm: 1 } }) });
    const geminiCall = () =>
      fetch(`${sim.url}/v1beta/models/gemini-limit:generateContent`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': 'k' },
        body: JSON.stringify({
          contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'image/jpeg', data: jpegBase64 } }, { text: 'hi' }] }],
          generationConfig: { responseMimeType: 'application/json', responseJsonSchema: VENDOR_REGISTRY.google.toSchema(HAND_SCHEMA) },
        }),
      });
    expect((await geminiCall()).status).toBe(200);
    const refused = await geminiCall();
    expect(refused.status).toBe(429);
    const retryAfter = refused.headers.get('retry-after');
    expect(await refused.json()).toMatchObject({
      error: { code: 429, status: 'RESOURCE_EXHAUSTED', details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${retryAfter}s` }] },
    });
    expect((await openaiCall()).status).toBe(200);
    const openaiRefused = await openaiCall();
    expect(openaiRefused.status).toBe(429);
    expect(((await openaiRefused.json()) as { error: object }).error).not.toHaveProperty('details');
    sim.reset();
  });

  it('POST /__sim/limits changes a limit at runtime; reset restores the starting ones', async () => {
    sim.reset();
    const set = await fetch(`${sim.url}/__sim/limits`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ openai: { rpm: 1 } }) });
    expect(await set.json()).toMatchObject({ openai: { rpm: 1, tpm: 0 } });
    expect((await openaiCall()).status).toBe(200);
    expect((await openaiCall()).status).toBe(429);
    const bad = await fetch(`${sim.url}/__sim/limits`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mistral: { rpm: 1 } }) });
    expect(bad.status).toBe(400);
    sim.reset();
    expect(sim.limits('openai')).toEqual({ rpm: 3, tpm: 0 });
  });
});

describe('the sliding window', () => {
  it('no 60-second span holds more than rpm admitted calls, and room comes back exactly as the oldest leaves', () => {
    const rl = createVendorRateLimit({ rpm: 10, tpm: 0 });
    const admitted: number[] = [];
    for (let t = 0; t < 180_000; t += 250) if (rl.admit(t).ok) admitted.push(t);
    for (const t of admitted) expect(admitted.filter((u) => u > t - 60_000 && u <= t).length).toBeLessThanOrEqual(10);
    // Ten at once, then ten more each time the first ten leave the window.
    expect(admitted.length).toBe(30);
    const next = rl.admit(179_999);
    expect(next.ok).toBe(false);
  });

  it('tokens per minute: refused once the window\'s tokens reach the limit, until enough of them leave', () => {
    const rl = createVendorRateLimit({ rpm: 0, tpm: 1000 });
    const a = rl.admit(0);
    if (!a.ok) throw new Error('first call refused');
    a.addTokens(600);
    const b = rl.admit(10_000);
    if (!b.ok) throw new Error('second call refused');
    b.addTokens(600);
    const c = rl.admit(20_000);
    expect(c).toEqual({ ok: false, retryAfterMs: 40_000 });
    expect(rl.admit(60_001).ok).toBe(true);
  });

  it('flags and SIM_* variables set limits for every vendor and per vendor', () => {
    const o = simOptionsFrom(['--rpm', '600', '--anthropic-tpm', '90000'], { SIM_OPENAI_RPM: '60' });
    expect(o.limits).toEqual({ all: { rpm: 600 }, openai: { rpm: 60 }, anthropic: { tpm: 90000 }, google: {} });
  });
});
