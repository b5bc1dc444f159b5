import {
  decodeBase64Image,
  hasBearer,
  isObject,
  ProtocolError,
  randomId,
  requireObject,
  requireString,
  shrink,
  walkSchema,
  type ErrorStatus,
  type PromptSegment,
  type Protocol,
  type SimCall,
  type WireResponse,
} from '../../tools/sim/protocols/common.ts';

/**
 * OpenAI Chat Completions: `POST /v1/chat/completions` with `response_format: {type: 'json_schema',
 * json_schema: {name, schema, strict}}`. Strict schemas are checked the way OpenAI does (every
 * object closed and fully required; only the supported keywords), so an adapter that sends a
 * schema OpenAI would refuse fails against the sim too.
 *
 * The simulated vendor (tools/sim), kept in the vendor's folder but not product code: only the
 * simulator loads it (tools/sim/protocols/index.ts), it imports nothing of the product, and what it
 * bills is its own reading of the vendor's published rules, apart from index.ts beside it
 * (.dependency-cruiser.cjs, docs/architecture.md "Adding a vendor").
 */

const STRICT_KEYWORDS = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'anyOf', 'enum', 'const', '$ref', '$defs',
  'definitions', 'description', 'title', 'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum',
  'exclusiveMaximum', 'multipleOf', 'minItems', 'maxItems',
]);
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function strictSchemaProblem(schema: Record<string, unknown>): string | undefined {
  if (schema.type !== 'object') return "the root schema must be of type 'object'";
  let problem: string | undefined;
  walkSchema(schema, (node, path) => {
    if (problem) return;
    const bad = Object.keys(node).find((k) => !STRICT_KEYWORDS.has(k));
    if (bad) {
      problem = `In context=${path}, '${bad}' is not permitted.`;
      return;
    }
    if (isObject(node.properties)) {
      if (node.additionalProperties !== false) {
        problem = `In context=${path}, 'additionalProperties' is required to be supplied and to be false.`;
        return;
      }
      const required = Array.isArray(node.required) ? node.required : [];
      const missing = Object.keys(node.properties).find((k) => !required.includes(k));
      if (missing) problem = `In context=${path}, 'required' is required to be supplied and to be an array including every key in properties. Missing '${missing}'.`;
    }
  });
  return problem;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((p): p is { type: 'text'; text: string } => isObject(p) && p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('\n');
}

const DATA_URL = /^data:(image\/[a-z+.-]+);base64,(.*)$/s;

function parse(raw: unknown): SimCall {
  const body = requireObject(raw, 'body');
  const model = requireString(body.model, 'model');
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new ProtocolError(400, "Missing required parameter: 'messages'.");
  const texts: string[] = [];
  const images: Buffer[] = [];
  const messageSegments: PromptSegment[] = [];
  body.messages.forEach((m: unknown, i: number) => {
    const msg = requireObject(m, `messages[${i}]`);
    texts.push(textOf(msg.content));
    if (typeof msg.content === 'string') messageSegments.push({ text: msg.content });
    if (!Array.isArray(msg.content)) return;
    msg.content.forEach((part: unknown, j: number) => {
      if (isObject(part) && part.type === 'text' && typeof part.text === 'string') messageSegments.push({ text: part.text });
      if (msg.role !== 'user' || !isObject(part) || part.type !== 'image_url') return;
      const url = isObject(part.image_url) ? part.image_url.url : undefined;
      const match = typeof url === 'string' ? DATA_URL.exec(url) : null;
      if (!match) throw new ProtocolError(400, `messages[${i}].content[${j}].image_url.url: the simulator accepts base64 data URLs only`);
      messageSegments.push({ image: images.length });
      images.push(decodeBase64Image(match[2], `messages[${i}].content[${j}].image_url`));
    });
  });

  const format = isObject(body.response_format) ? body.response_format : undefined;
  if (format?.type !== 'json_schema' || !isObject(format.json_schema)) {
    throw new ProtocolError(400, "The simulator only answers structured output: set response_format.type 'json_schema'.");
  }
  const spec = format.json_schema;
  const name = requireString(spec.name, 'response_format.json_schema.name');
  if (!NAME.test(name)) throw new ProtocolError(400, `Invalid 'response_format.json_schema.name': string does not match pattern '^[a-zA-Z0-9_-]+$'.`);
  const schema = requireObject(spec.schema, 'response_format.json_schema.schema');
  if (spec.strict === true) {
    const problem = strictSchemaProblem(schema);
    if (problem) throw new ProtocolError(400, `Invalid schema for response_format '${name}': ${problem}`);
  }
  return {
    model,
    schema,
    schemaName: name,
    images,
    promptText: [...texts, JSON.stringify(format)].join('\n'),
    answerAs: 'text',
    // The structured-output schema is a prefix to the system message (OpenAI's caching guide).
    segments: [{ text: JSON.stringify(format) }, ...messageSegments],
    cacheHint: typeof body.prompt_cache_key === 'string' ? body.prompt_cache_key : null,
  };
}

const ERRORS: Record<ErrorStatus, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory' },
  404: { type: 'invalid_request_error', code: 'unknown_url' },
  413: { type: 'invalid_request_error', code: 'request_too_large' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
  500: { type: 'server_error', code: null },
};

export const protocol: Protocol<'openai'> = {
  vendor: 'openai',
  route: (path) => (path === '/v1/chat/completions' ? {} : undefined),
  baseURLHint: 'openai <sim>/v1',
  hasKey: hasBearer,
  missingKeyStatus: 401,
  /**
   * Vision guide, "Calculating costs", detail "high": the image is scaled to fit within a
   * 2048 × 2048 square, then so that its shortest side is 768 px (never enlarged); it costs
   * 85 tokens plus 170 per 512 × 512 tile needed to cover it.
   */
  imageTokens(received) {
    let d = shrink(received, 2048 / Math.max(received.width, received.height));
    d = shrink(d, 768 / Math.min(d.width, d.height));
    const tiles = Math.ceil(d.width / 512) * Math.ceil(d.height / 512);
    return 85 + 170 * tiles;
  },
  /**
   * Prompt caching guide: automatic for prompts of 1024 tokens or more, with or without
   * `prompt_cache_key`; the cached part is 1024 tokens plus whole 128-token steps.
   */
  cache: { automatic: true, minTokens: 1024, step: 128, ttlMs: 5 * 60_000 },
  // Its rate limiter counts every prompt token, cache hits included.
  limitedTokens: (u) => u.inputTokens + u.outputTokens,
  parse,
  success(call, answer, usage): WireResponse {
    const content = 'raw' in answer ? answer.raw : JSON.stringify(answer.json);
    return {
      status: 200,
      headers: { 'x-request-id': `req_${randomId(32, '0123456789abcdef')}` },
      body: {
        id: `chatcmpl-${randomId(29)}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: call.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content, refusal: null, annotations: [] },
            logprobs: null,
            finish_reason: 'stop',
          },
        ],
        usage: {
          prompt_tokens: usage.inputTokens,
          completion_tokens: usage.outputTokens,
          total_tokens: usage.inputTokens + usage.outputTokens,
          prompt_tokens_details: { cached_tokens: usage.cachedTokens, audio_tokens: 0 },
          completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
        },
        service_tier: 'default',
        system_fingerprint: 'fp_lenstack_sim',
      },
    };
  },
  error(status, message): WireResponse {
    const { type, code } = ERRORS[status];
    return {
      status,
      headers: { 'x-request-id': `req_${randomId(32, '0123456789abcdef')}`, ...(status === 429 ? { 'retry-after': '1' } : {}) },
      body: { error: { message, type, param: null, code } },
    };
  },
};
