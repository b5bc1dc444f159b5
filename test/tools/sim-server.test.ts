import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { startSimVendor, type SimVendor } from '../../tools/sim/index.ts';
import { prepareImage } from '../../vendors/resize.ts';
import { HAND_SCHEMA, lensLikeSchema, photo } from '../vendors/fixtures.ts';
import { VENDOR_REGISTRY } from '../../vendors/registry.ts';

const toOpenAISchema = VENDOR_REGISTRY.openai.toSchema;
const toGeminiSchema = VENDOR_REGISTRY.google.toSchema;

/** The sim at the wire, with plain fetch: response shapes, refusals, control endpoints. */

let sim: SimVendor;
let jpegBase64: string;

beforeAll(async () => {
  sim = await startSimVendor({ seed: 'wire-tests' });
  jpegBase64 = (await prepareImage('openai', photo('gps-DSCN0012.jpg'))).data.toString('base64');
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => sim.reset());

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(sim.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

const openaiBody = (schema: Record<string, unknown> = toOpenAISchema(HAND_SCHEMA), image = jpegBase64) => ({
  model: 'gpt-wire',
  messages: [
    { role: 'system', content: 'sys' },
    { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${image}` } }, { type: 'text', text: 'hi' }] },
  ],
  response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
});
const anthropicBody = (schema: Record<string, unknown> = HAND_SCHEMA) => ({
  model: 'claude-wire',
  max_tokens: 1000,
  system: 'sys',
  messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: jpegBase64 } }, { type: 'text', text: 'hi' }] }],
  tools: [{ name: 'record', input_schema: schema }],
  tool_choice: { type: 'tool', name: 'record' },
});
const geminiBody = (schema: Record<string, unknown> = toGeminiSchema(HAND_SCHEMA)) => ({
  contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'image/jpeg', data: jpegBase64 } }, { text: 'hi' }] }],
  systemInstruction: { parts: [{ text: 'sys' }] },
  generationConfig: { responseMimeType: 'application/json', responseJsonSchema: schema },
});
const OPENAI_AUTH = { authorization: 'Bearer k' };
const ANTHROPIC_AUTH = { 'x-api-key': 'k' };
const GEMINI_AUTH = { 'x-goog-api-key': 'k' };

describe('response shapes are the vendors\' own', () => {
  it('OpenAI chat.completion: id, echoed model, message content with JSON, finish_reason, usage names', async () => {
    const { status, headers, body } = await post('/v1/chat/completions', openaiBody(), OPENAI_AUTH);
    expect(status).toBe(200);
    expect(headers.get('x-lenstack-simulated')).toBe('true');
    expect(body).toMatchObject({
      id: expect.stringMatching(/^chatcmpl-/),
      object: 'chat.completion',
      model: 'gpt-wire',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', refusal: null, content: expect.any(String) } }],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number), total_tokens: expect.any(Number) },
    });
    expect(JSON.parse(body.choices[0].message.content)).toHaveProperty('objects');
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
  });

  it('Anthropic message: tool_use block with the input, stop_reason tool_use, usage input/output tokens', async () => {
    const { status, headers, body } = await post('/v1/messages', anthropicBody(), ANTHROPIC_AUTH);
    expect(status).toBe(200);
    expect(headers.get('request-id')).toMatch(/^req_/);
    expect(body).toMatchObject({
      id: expect.stringMatching(/^msg_/),
      type: 'message',
      role: 'assistant',
      model: 'claude-wire',
      stop_reason: 'tool_use',
      content: [{ type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'record', input: { objects: expect.any(Array) } }],
      usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number) },
    });
  });

  it('Anthropic output_config.format json_schema: a text block holding the JSON', async () => {
    const { tools: _t, tool_choice: _c, ...rest } = anthropicBody();
    const { body } = await post('/v1/messages', { ...rest, output_config: { format: { type: 'json_schema', schema: HAND_SCHEMA } } }, ANTHROPIC_AUTH);
    expect(body.stop_reason).toBe('end_turn');
    expect(JSON.parse(body.content[0].text)).toHaveProperty('location');
  });

  it('Gemini generateContent: candidates/content/parts, finishReason STOP, usageMetadata with the image modality', async () => {
    const { status, body } = await post('/v1beta/models/gemini-wire:generateContent', geminiBody(), GEMINI_AUTH);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      candidates: [{ content: { role: 'model', parts: [{ text: expect.any(String) }] }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: expect.any(Number), candidatesTokenCount: expect.any(Number), totalTokenCount: expect.any(Number) },
      modelVersion: 'gemini-wire',
    });
    const details = body.usageMetadata.promptTokensDetails as { modality: string; tokenCount: number }[];
    expect(details.find((d) => d.modality === 'IMAGE')?.tokenCount).toBe(258); // 640×480 → one 768 tile
    expect(details.reduce((n, d) => n + d.tokenCount, 0)).toBe(body.usageMetadata.promptTokenCount);
  });
});

describe('refusals in each vendor\'s error format', () => {
  it('no key: 401 OpenAI / 401 Anthropic / 403 Gemini', async () => {
    const o = await post('/v1/chat/completions', openaiBody());
    expect(o.status).toBe(401);
    expect(o.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
    const a = await post('/v1/messages', anthropicBody());
    expect(a.status).toBe(401);
    expect(a.body).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const g = await post('/v1beta/models/m:generateContent', geminiBody());
    expect(g.status).toBe(403);
    expect(g.body.error).toMatchObject({ code: 403, status: 'PERMISSION_DENIED' });
  });

  it('OpenAI strict mode refuses a schema OpenAI would refuse (untranslated minLength, open object)', async () => {
    const untranslated = lensLikeSchema();
    const r = await post('/v1/chat/completions', openaiBody(untranslated), OPENAI_AUTH);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/is not permitted/);
    const open = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
    expect((await post('/v1/chat/completions', openaiBody(open), OPENAI_AUTH)).body.error.message).toMatch(/additionalProperties/);
    const partial = { type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } }, required: ['a'], additionalProperties: false };
    expect((await post('/v1/chat/completions', openaiBody(partial), OPENAI_AUTH)).body.error.message).toMatch(/Missing 'b'/);
    // The adapter's translation is accepted.
    expect((await post('/v1/chat/completions', openaiBody(toOpenAISchema(untranslated)), OPENAI_AUTH)).status).toBe(200);
  });

  it('Gemini refuses keywords outside the responseJsonSchema subset', async () => {
    const r = await post('/v1beta/models/m:generateContent', geminiBody(lensLikeSchema()), GEMINI_AUTH);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: expect.stringMatching(/Unknown name "\$schema"|Unknown name "minLength"/) });
  });

  it('Anthropic requires max_tokens; a tool_choice must name an existing tool', async () => {
    const { max_tokens: _m, ...noMax } = anthropicBody();
    expect((await post('/v1/messages', noMax, ANTHROPIC_AUTH)).body.error).toMatchObject({ type: 'invalid_request_error', message: 'max_tokens: Field required' });
    const wrongTool = { ...anthropicBody(), tool_choice: { type: 'tool', name: 'nope' } };
    expect((await post('/v1/messages', wrongTool, ANTHROPIC_AUTH)).status).toBe(400);
  });

  it('non-structured requests, non-JSON bodies and undecodable images are 400s, counted as refused', async () => {
    const { response_format: _rf, ...plain } = openaiBody();
    expect((await post('/v1/chat/completions', plain, OPENAI_AUTH)).status).toBe(400);
    expect((await post('/v1/chat/completions', '{not json', OPENAI_AUTH)).status).toBe(400);
    const bad = await post('/v1/chat/completions', openaiBody(toOpenAISchema(HAND_SCHEMA), Buffer.from('not an image').toString('base64')), OPENAI_AUTH);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/not a decodable image/);
    expect(sim.stats().openai).toMatchObject({ calls: 3, refused: 3, succeeded: 0 });
  });

  it('an unknown path is a 404 that names the base URL each SDK needs', async () => {
    const r = await post('/chat/completions', openaiBody(), OPENAI_AUTH);
    expect(r.status).toBe(404);
    expect(r.body.error.message).toBe('Lenstack vendor simulator: no route POST /chat/completions. Base URLs: openai <sim>/v1, anthropic <sim>, @google/genai <sim>.');
    // A known path with the wrong method is not a vendor's route either.
    expect((await fetch(`${sim.url}/v1/messages`)).status).toBe(404);
  });

  it("each vendor's key is found where its SDK puts it: Anthropic also as a bearer, Gemini also as ?key=, OpenAI only as a bearer", async () => {
    expect((await post('/v1/messages', anthropicBody(), { authorization: 'Bearer k' })).status).toBe(200);
    expect((await post('/v1beta/models/m:generateContent?key=k', geminiBody())).status).toBe(200);
    expect((await post('/v1/models/gemini-v1:generateContent', geminiBody(), GEMINI_AUTH)).body.modelVersion).toBe('gemini-v1');
    expect((await post('/v1/chat/completions', openaiBody(), { 'x-api-key': 'k' })).status).toBe(401);
    expect((await post('/v1/messages', anthropicBody(), { 'x-goog-api-key': 'k' })).status).toBe(401);
    expect((await post('/v1beta/models/m:generateContent', geminiBody(), OPENAI_AUTH)).status).toBe(403);
    expect(sim.stats()).toMatchObject({ openai: { refused: 1 }, anthropic: { refused: 1, succeeded: 1 }, google: { refused: 1, succeeded: 2 } });
  });
});

describe('behaviour', () => {
  it('failRate draws from a seeded PRNG: the same sequence after every reset, at roughly the rate', async () => {
    const run = async () => {
      sim.setBehaviour('openai', { failRate: 0.5, failure: 'http500' });
      const outcomes: number[] = [];
      for (let i = 0; i < 24; i++) outcomes.push((await post('/v1/chat/completions', openaiBody(), OPENAI_AUTH)).status);
      return outcomes;
    };
    const first = await run();
    sim.reset();
    const second = await run();
    expect(second).toEqual(first);
    const failures = first.filter((s) => s === 500).length;
    expect(failures).toBeGreaterThan(4);
    expect(failures).toBeLessThan(20);
    expect(sim.stats().openai.failed.http500).toBe(failures);
  });

  it('keepFailureSequence: a mode change continues the failure sequence instead of replaying it', async () => {
    const draw = async (n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await post('/v1/chat/completions', openaiBody(), OPENAI_AUTH)).status);
      return out;
    };
    const failed = (statuses: number[]) => statuses.map((s) => s !== 200);
    sim.setBehaviour('openai', { failRate: 0.5, failure: 'http500' });
    const whole = await draw(24);
    sim.setBehaviour('openai', { failRate: 0.5, failure: 'http500' });
    const first = await draw(12);
    sim.setBehaviour('openai', { failure: 'http429' }, { keepFailureSequence: true });
    const rest = await draw(12);
    expect(first).toEqual(whole.slice(0, 12));
    expect(failed(rest)).toEqual(failed(whole.slice(12)));
    expect(rest.filter((s) => s !== 200).every((s) => s === 429)).toBe(true);
  });

  it('latencyMs delays the answer', async () => {
    sim.setBehaviour('google', { latencyMs: 250 });
    const started = Date.now();
    expect((await post('/v1beta/models/m:generateContent', geminiBody(), GEMINI_AUTH)).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(240);
  });

  it('http429 carries retry-after like the real vendors', async () => {
    sim.setBehaviour('anthropic', { failRate: 1, failure: 'http429' });
    const r = await post('/v1/messages', anthropicBody(), ANTHROPIC_AUTH);
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
    expect(r.body.error.type).toBe('rate_limit_error');
  });

  it('close() returns even while a stalled call holds its connection open', async () => {
    const own = await startSimVendor({ vendors: { openai: { failRate: 1, failure: 'stall' } } });
    const pending = fetch(`${own.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...OPENAI_AUTH },
      body: JSON.stringify(openaiBody()),
    }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(own.stats().openai.failed.stall).toBe(1), { timeout: 5000, interval: 10 });
    await own.close();
    expect(await pending).toBeInstanceOf(Error);
  });
});

describe('control endpoints', () => {
  it('GET/POST /__sim/config patches per vendor or all, validates, and reset restores the start values', async () => {
    const own = await startSimVendor({ behaviour: { latencyMs: 5 } });
    try {
      const initial = (await (await fetch(`${own.url}/__sim/config`)).json()) as Record<string, unknown>;
      expect(initial.google).toEqual({ latencyMs: 5, failRate: 0, failure: 'http500' });

      const patched = await fetch(`${own.url}/__sim/config`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ all: { failure: 'stall' }, google: { failRate: 0.25 } }),
      });
      expect(await patched.json()).toMatchObject({
        openai: { failure: 'stall', failRate: 0 },
        google: { failure: 'stall', failRate: 0.25, latencyMs: 5 },
      });

      const invalid = await fetch(`${own.url}/__sim/config`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ openai: { failRate: 2 }, mistral: {} }),
      });
      expect(invalid.status).toBe(400);
      expect(own.behaviour('openai').failRate).toBe(0);

      await fetch(`${own.url}/__sim/reset`, { method: 'POST' });
      expect(own.behaviour('google')).toEqual({ latencyMs: 5, failRate: 0, failure: 'http500' });
    } finally {
      await own.close();
    }
  });
});
