import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSimVendor, type SimVendor } from '../../tools/sim/index.ts';
import { createPromptCache, describeSegments } from '../../tools/sim/prompt-cache.ts';
import { prepareImage } from '../../vendors/resize.ts';
import { HAND_SCHEMA, photo } from '../vendors/fixtures.ts';
import { VENDOR_REGISTRY } from '../../vendors/registry.ts';
import { SIM_PROTOCOLS } from '../../tools/sim/protocols/index.ts';

const toOpenAISchema = VENDOR_REGISTRY.openai.toSchema;
const toGeminiSchema = VENDOR_REGISTRY.google.toSchema;

/**
 * The sim's prompt caches at the wire, in each vendor's own usage fields: a repeated prefix is
 * read from the cache (OpenAI and Gemini on their own from 1024 tokens, Anthropic only up to a
 * `cache_control` breakpoint), a short one never is, a different model or a reset starts cold.
 */

let sim: SimVendor;
let photoA: string;
let photoB: string;

beforeAll(async () => {
  sim = await startSimVendor({ seed: 'prompt-cache-tests' });
  photoA = (await prepareImage('openai', photo('gps-DSCN0012.jpg'))).data.toString('base64');
  photoB = (await prepareImage('openai', photo('Canon_40D.jpg'))).data.toString('base64');
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => sim.reset());

/** ~2,000 tokens of instructions at the sim's 4 characters a token: above every vendor's minimum. */
const LONG = 'Describe what the photo shows, carefully and honestly. '.repeat(150);
const SHORT = 'Describe the photo.';

async function post(path: string, body: unknown, headers: Record<string, string>) {
  const res = await fetch(sim.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as any;
}

const openai = (system: string, image: string, extra: Record<string, unknown> = {}) =>
  post(
    '/v1/chat/completions',
    {
      model: 'gpt-cache',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: [{ type: 'text', text: 'Analyse the attached photo.' }, { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${image}` } }] },
      ],
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: toOpenAISchema(HAND_SCHEMA), strict: true } },
      ...extra,
    },
    { authorization: 'Bearer k' },
  );

const anthropic = (system: string, image: string, hint: boolean, model = 'claude-cache') =>
  post(
    '/v1/messages',
    {
      model,
      max_tokens: 1000,
      system: [{ type: 'text', text: system, ...(hint ? { cache_control: { type: 'ephemeral' } } : {}) }],
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: image } }, { type: 'text', text: 'Analyse the photo.' }] }],
      tools: [{ name: 'record', input_schema: HAND_SCHEMA }],
      tool_choice: { type: 'tool', name: 'record' },
    },
    { 'x-api-key': 'k' },
  );

const gemini = (system: string, image: string) =>
  post(
    '/v1beta/models/gemini-cache:generateContent',
    {
      systemInstruction: { parts: [{ text: system }] },
      contents: [{ role: 'user', parts: [{ text: 'Analyse the attached photo.' }, { inlineData: { mimeType: 'image/jpeg', data: image } }] }],
      generationConfig: { responseMimeType: 'application/json', responseJsonSchema: toGeminiSchema(HAND_SCHEMA) },
    },
    { 'x-goog-api-key': 'k' },
  );

describe('OpenAI: automatic from 1024 tokens, in prompt_tokens_details.cached_tokens', () => {
  it('the second photo behind the same long prefix reads 1024 + whole 128-token steps of it from the cache, hint or not', async () => {
    const first = await openai(LONG, photoA);
    expect(first.usage.prompt_tokens_details.cached_tokens).toBe(0);
    const second = await openai(LONG, photoB);
    const cached = second.usage.prompt_tokens_details.cached_tokens;
    // The schema, the system message and the task text are the prefix; the photo differs.
    const last = sim.stats().openai.last!;
    const prefix = last.segments.slice(0, -1).reduce((n, s) => n + s.tokens, 0);
    expect(cached).toBe(1024 + Math.floor((prefix - 1024) / 128) * 128);
    expect(cached).toBeGreaterThan(1024);
    expect(second.usage.prompt_tokens).toBe(last.inputTokens);
    expect(last.cacheHint).toBeNull();
    // With a prompt_cache_key the cache answers alike (the sim records the key it got); the
    // first photo again is a prompt seen whole, photo included.
    const keyed = await openai(LONG, photoA, { prompt_cache_key: 'lenstack-abc' });
    const again = sim.stats().openai.last!;
    expect(again.cacheHint).toBe('lenstack-abc');
    const whole = again.segments.reduce((n, s) => n + s.tokens, 0);
    expect(keyed.usage.prompt_tokens_details.cached_tokens).toBe(1024 + Math.floor((whole - 1024) / 128) * 128);
  });

  it('a prefix under 1024 tokens is never cached; another model or a reset starts cold', async () => {
    await openai(SHORT, photoA);
    expect((await openai(SHORT, photoB)).usage.prompt_tokens_details.cached_tokens).toBe(0);
    await openai(LONG, photoA);
    sim.reset();
    expect((await openai(LONG, photoB)).usage.prompt_tokens_details.cached_tokens).toBe(0);
  });
});

describe('Anthropic: only up to cache_control, writes then reads', () => {
  it('without the hint nothing is cached; with it the first call writes tools + system and the next reads them, the total input unchanged', async () => {
    const plain1 = await anthropic(LONG, photoA, false);
    const plain2 = await anthropic(LONG, photoB, false);
    for (const u of [plain1.usage, plain2.usage]) {
      expect({ read: u.cache_read_input_tokens, write: u.cache_creation_input_tokens }).toEqual({ read: 0, write: 0 });
    }
    expect(sim.stats().anthropic.last!.cacheHint).toBeNull();

    const write = (await anthropic(LONG, photoA, true)).usage;
    const segments = sim.stats().anthropic.last!.segments;
    const prefix = segments.slice(0, segments.findIndex((s) => s.breakpoint) + 1).reduce((n, s) => n + s.tokens, 0);
    expect(write.cache_creation_input_tokens).toBe(prefix);
    expect(write.cache_creation.ephemeral_5m_input_tokens).toBe(prefix);
    expect(write.cache_read_input_tokens).toBe(0);
    const read = (await anthropic(LONG, photoB, true)).usage;
    expect(read.cache_read_input_tokens).toBe(prefix);
    expect(read.cache_creation_input_tokens).toBe(0);
    expect(sim.stats().anthropic.last!.cacheHint).toBe('cache_control');
    // Anthropic's input_tokens are what follows the breakpoint: the three add up to the same input.
    const total = (u: any) => u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
    expect(total(read)).toBe(total(plain2.usage));
    expect(total(write)).toBe(total(plain1.usage));
  });

  it('a breakpoint under 1024 tokens caches nothing; the cache is per model', async () => {
    await anthropic(SHORT, photoA, true);
    const short = (await anthropic(SHORT, photoB, true)).usage;
    expect(short.cache_read_input_tokens + short.cache_creation_input_tokens).toBe(0);
    await anthropic(LONG, photoA, true);
    const other = (await anthropic(LONG, photoB, true, 'claude-other')).usage;
    expect(other.cache_read_input_tokens).toBe(0);
    expect(other.cache_creation_input_tokens).toBeGreaterThan(1024);
  });
});

describe('Gemini: implicit from 1024 tokens, in usageMetadata.cachedContentTokenCount', () => {
  it('the second photo behind the same system instruction and schema reads them from the cache', async () => {
    const first = await gemini(LONG, photoA);
    expect(first.usageMetadata.cachedContentTokenCount).toBeUndefined();
    const second = await gemini(LONG, photoB);
    const segments = sim.stats().google.last!.segments;
    expect(second.usageMetadata.cachedContentTokenCount).toBe(segments.slice(0, -1).reduce((n, s) => n + s.tokens, 0));
    expect(second.usageMetadata.promptTokenCount).toBe(sim.stats().google.last!.inputTokens);
  });
});

describe('cache reads and the tokens-per-minute limit', () => {
  /** ~10,000 tokens read from the cache on a repeat: far more than the rest of a call. */
  const HUGE = LONG.repeat(5);
  const statusOf = async (call: () => Promise<unknown>) => call().then(() => 200, () => 429);
  const send = async (path: string, body: unknown, headers: Record<string, string>) => {
    const res = await fetch(sim.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(String(res.status));
  };
  /** A limit the window stays under for a first call and two repeats only if the repeats' cache reads are left out. */
  const limitFor = (first: { inputTokens: number; outputTokens: number }, repeat: { inputTokens: number; cachedTokens: number; outputTokens: number }) => {
    const uncached = repeat.inputTokens - repeat.cachedTokens + repeat.outputTokens;
    expect(repeat.cachedTokens).toBeGreaterThan(uncached);
    return first.inputTokens + first.outputTokens + 2 * uncached + 1;
  };

  it('Anthropic leaves cache reads out of its token limit: repeats of a cached prefix are admitted', async () => {
    const anthropicCall = (model: string) => () =>
      send('/v1/messages', {
        model, max_tokens: 1000,
        system: [{ type: 'text', text: HUGE, cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: photoA } }, { type: 'text', text: 'Analyse the photo.' }] }],
        tools: [{ name: 'record', input_schema: HAND_SCHEMA }], tool_choice: { type: 'tool', name: 'record' },
      }, { 'x-api-key': 'k' });
    // The sizes: a write, then a read of the cached prefix.
    await anthropicCall('claude-sizes')();
    const first = sim.stats().anthropic.last!;
    await anthropicCall('claude-sizes')();
    const repeat = sim.stats().anthropic.last!;
    // A fresh window (and cache) for the limited calls.
    sim.reset();
    sim.setLimits('anthropic', { tpm: limitFor(first, repeat) });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push(await statusOf(anthropicCall('claude-sizes')));
    expect(statuses).toEqual([200, 200, 200, 200]);
  });

  it('OpenAI counts them: the same limit refuses the second repeat', async () => {
    const openaiCall = (model: string) => () =>
      send('/v1/chat/completions', {
        model,
        messages: [{ role: 'system', content: HUGE }, { role: 'user', content: [{ type: 'text', text: 'Analyse the attached photo.' }, { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${photoA}` } }] }],
        response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: toOpenAISchema(HAND_SCHEMA), strict: true } },
      }, { authorization: 'Bearer k' });
    await openaiCall('gpt-sizes')();
    const first = sim.stats().openai.last!;
    await openaiCall('gpt-sizes')();
    const repeat = sim.stats().openai.last!;
    sim.reset();
    sim.setLimits('openai', { tpm: limitFor(first, repeat) });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push(await statusOf(openaiCall('gpt-sizes')));
    expect(statuses).toEqual([200, 200, 429]);
  });

  it("the product's vendor budget settles each vendor's calls as its limit counts them (vendors/<vendor>/index.ts, against the simulator's reading)", () => {
    const usage = { model: 'm', inputTokens: 12_000, cachedInputTokens: 10_000, cacheWriteInputTokens: 0, outputTokens: 300 };
    const sim = { inputTokens: 12_000, cachedTokens: 10_000, cacheWriteTokens: 0, outputTokens: 300, imageTokens: 0, textTokens: 0 };
    const product = Object.fromEntries(Object.values(VENDOR_REGISTRY).map((p) => [p.name, p.limitedTokens(usage)]));
    const simulated = Object.fromEntries(Object.values(SIM_PROTOCOLS).map((p) => [p.vendor, p.limitedTokens(sim)]));
    expect(product).toEqual(simulated);
    expect(product).toEqual({ openai: 12_300, anthropic: 2_300, google: 12_300 });
  });
});

describe('the cache itself', () => {
  const text = (t: string, breakpoint = false) => ({ text: t, breakpoint });
  const seen = (parts: Array<{ text: string; breakpoint?: boolean }>) => describeSegments(parts, [], [], (s) => Math.ceil(s.length / 4));

  it('an entry lives 5 minutes from its last use, per vendor', () => {
    let now = 0;
    const cache = createPromptCache(() => now);
    const prompt = seen([text('x'.repeat(8000)), text('photo 1')]);
    expect(cache.use('openai', 'm', prompt).cachedTokens).toBe(0);
    // 2,002 tokens seen before: 1024 and seven whole steps of 128.
    now = 4 * 60_000;
    expect(cache.use('openai', 'm', prompt).cachedTokens).toBe(1920);
    // The hit refreshed it: still there 8 minutes after the first use.
    now = 8 * 60_000;
    expect(cache.use('openai', 'm', prompt).cachedTokens).toBe(1920);
    expect(cache.use('google', 'm', prompt).cachedTokens).toBe(0);
    now = 14 * 60_000;
    expect(cache.use('openai', 'm', prompt).cachedTokens).toBe(0);
  });

  it('segment boundaries count: the same text cut differently is another prompt', () => {
    const a = seen([text('ab'), text('c')]);
    const b = seen([text('a'), text('bc')]);
    expect(a.at(-1)!.prefixHash).not.toBe(b.at(-1)!.prefixHash);
  });
});
