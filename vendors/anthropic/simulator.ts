import {
  decodeBase64Image,
  hasBearer,
  isObject,
  ProtocolError,
  randomId,
  requireObject,
  requireString,
  shrink,
  type ErrorStatus,
  type PromptSegment,
  type Protocol,
  type SimCall,
  type WireResponse,
} from '../../tools/sim/protocols/common.ts';

/**
 * Anthropic Messages: `POST /v1/messages`. The schema comes from the tool the request forces
 * (`tool_choice: {type: 'tool', name}`), or from the only/first tool for `any`/`auto`, or from
 * `output_config.format` (json_schema). A tool answer is a `tool_use` block with `input`.
 *
 * The simulated vendor (tools/sim), kept in the vendor's folder but not product code: only the
 * simulator loads it (tools/sim/protocols/index.ts), it imports nothing of the product, and what it
 * bills is its own reading of the vendor's published rules, apart from index.ts beside it
 * (.dependency-cruiser.cjs, docs/architecture.md "Adding a vendor").
 */

const MEDIA_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

function textBlocks(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((b): b is { type: 'text'; text: string } => isObject(b) && b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text)
    .join('\n');
}

/** A string, or a list of blocks: text and image blocks as segments, `cache_control` as breakpoints. */
function blockSegments(content: unknown, images: Map<object, number>): PromptSegment[] {
  if (typeof content === 'string') return [{ text: content }];
  if (!Array.isArray(content)) return [];
  return content.filter(isObject).flatMap((b): PromptSegment[] => {
    const breakpoint = isObject(b.cache_control);
    if (b.type === 'text' && typeof b.text === 'string') return [{ text: b.text, breakpoint }];
    const index = images.get(b);
    return index === undefined ? [] : [{ image: index, breakpoint }];
  });
}

function parse(raw: unknown): SimCall {
  const body = requireObject(raw, 'body');
  const model = requireString(body.model, 'model');
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    throw new ProtocolError(400, 'max_tokens: Field required');
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new ProtocolError(400, 'messages: Field required');
  const texts: string[] = [textBlocks(body.system)];
  const images: Buffer[] = [];
  const imageBlocks = new Map<object, number>();
  body.messages.forEach((m: unknown, i: number) => {
    const msg = requireObject(m, `messages.${i}`);
    texts.push(textBlocks(msg.content));
    if (!Array.isArray(msg.content)) return;
    msg.content.forEach((block: unknown, j: number) => {
      if (!isObject(block) || block.type !== 'image') return;
      imageBlocks.set(block, images.length);
      const source = requireObject(block.source, `messages.${i}.content.${j}.image.source`);
      if (source.type !== 'base64') {
        throw new ProtocolError(400, `messages.${i}.content.${j}.image.source: the simulator accepts base64 sources only`);
      }
      if (typeof source.media_type !== 'string' || !MEDIA_TYPES.has(source.media_type)) {
        throw new ProtocolError(400, `messages.${i}.content.${j}.image.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`);
      }
      images.push(decodeBase64Image(source.data, `messages.${i}.content.${j}.image.source.data`));
    });
  });

  // Anthropic's cache order: tools, system, messages.
  const tail: PromptSegment[] = [
    ...blockSegments(body.system, imageBlocks),
    ...(body.messages as unknown[]).flatMap((m) => blockSegments((m as Record<string, unknown>).content, imageBlocks)),
  ];
  const toolSegments: PromptSegment[] = (Array.isArray(body.tools) ? body.tools : []).map((t: unknown) => ({
    text: JSON.stringify(t),
    breakpoint: isObject(t) && isObject(t.cache_control),
  }));
  const segments = [...toolSegments, ...tail];
  const cacheHint = segments.some((s) => s.breakpoint) ? 'cache_control' : null;

  const outputFormat = isObject(body.output_config) && isObject(body.output_config.format) ? body.output_config.format : undefined;
  if (outputFormat?.type === 'json_schema') {
    const schema = requireObject(outputFormat.schema, 'output_config.format.schema');
    return {
      model,
      schema,
      schemaName: 'output',
      images,
      promptText: [...texts, JSON.stringify(outputFormat)].join('\n'),
      answerAs: 'text',
      segments: [{ text: JSON.stringify(outputFormat) }, ...segments],
      cacheHint,
    };
  }

  const tools = Array.isArray(body.tools) ? body.tools.filter(isObject) : [];
  const choice = isObject(body.tool_choice) ? body.tool_choice : { type: 'auto' };
  if (tools.length === 0 || choice.type === 'none') {
    throw new ProtocolError(400, 'The simulator only answers structured output: give a tool (tool_choice type "tool") or output_config.format.');
  }
  let tool = tools[0]!;
  if (choice.type === 'tool') {
    const named = tools.find((t) => t.name === choice.name);
    if (!named) throw new ProtocolError(400, `tool_choice.name: Tool '${String(choice.name)}' not found in tools`);
    tool = named;
  }
  const name = requireString(tool.name, 'tools.0.name');
  const schema = requireObject(tool.input_schema, `tools.${name}.input_schema`);
  if (schema.type !== 'object') throw new ProtocolError(400, `tools.${name}.input_schema.type: Input should be 'object'`);
  return { model, schema, schemaName: name, images, promptText: [...texts, JSON.stringify(body.tools)].join('\n'), answerAs: 'tool', segments, cacheHint };
}

const ERROR_TYPES: Record<ErrorStatus, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
};

const requestId = () => `req_${randomId(24)}`;

/** The largest unresized size in the vision guide's table (951 × 1268, 3:4): the pixel ceiling. */
const MAX_PIXELS = 951 * 1268;

export const protocol: Protocol<'anthropic'> = {
  vendor: 'anthropic',
  route: (path) => (path === '/v1/messages' ? {} : undefined),
  baseURLHint: 'anthropic <sim>',
  hasKey: (req) => hasBearer(req) || Boolean(req.headers['x-api-key']),
  missingKeyStatus: 401,
  /**
   * Vision guide, "Evaluate image size": an image whose long edge is over 1568 px, or larger than
   * the largest sizes the guide lists as not resized (about 1.15 megapixels, e.g. 1092 × 1092,
   * 951 × 1268), is first scaled down keeping its aspect ratio; it then costs about
   * width × height / 750 tokens.
   */
  imageTokens(received) {
    let d = received;
    if (Math.max(d.width, d.height) > 1568) d = shrink(d, 1568 / Math.max(d.width, d.height));
    if (d.width * d.height > MAX_PIXELS) d = shrink(d, Math.sqrt(MAX_PIXELS / (d.width * d.height)));
    return Math.ceil((d.width * d.height) / 750);
  },
  /**
   * Prompt caching docs: only up to a `cache_control` breakpoint, only from the model's minimum
   * (1024 tokens for Sonnet and Opus); the first request writes (`cache_creation_input_tokens`),
   * later ones within 5 minutes read (`cache_read_input_tokens`).
   */
  cache: { automatic: false, minTokens: 1024, step: 1, ttlMs: 5 * 60_000 },
  // Its input-tokens-per-minute limit does not count cache reads (cache writes it does).
  limitedTokens: (u) => u.inputTokens - u.cachedTokens + u.outputTokens,
  parse,
  success(call, answer, usage): WireResponse {
    let content: unknown[];
    let stopReason: string;
    if ('raw' in answer) {
      // A model that ignores the forced tool and writes prose: no tool_use block.
      content = [{ type: 'text', text: answer.raw, citations: null }];
      stopReason = 'end_turn';
    } else if (call.answerAs === 'tool') {
      content = [{ type: 'tool_use', id: `toolu_${randomId(24)}`, name: call.schemaName, input: answer.json, caller: { type: 'direct' } }];
      stopReason = 'tool_use';
    } else {
      content = [{ type: 'text', text: JSON.stringify(answer.json), citations: null }];
      stopReason = 'end_turn';
    }
    return {
      status: 200,
      headers: { 'request-id': requestId() },
      body: {
        id: `msg_${randomId(24)}`,
        type: 'message',
        role: 'assistant',
        model: call.model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        stop_details: null,
        container: null,
        diagnostics: null,
        usage: {
          // input_tokens are those after the last cache breakpoint: reads and writes are apart.
          input_tokens: usage.inputTokens - usage.cachedTokens - usage.cacheWriteTokens,
          output_tokens: usage.outputTokens,
          cache_creation_input_tokens: usage.cacheWriteTokens,
          cache_read_input_tokens: usage.cachedTokens,
          cache_creation: { ephemeral_5m_input_tokens: usage.cacheWriteTokens, ephemeral_1h_input_tokens: 0 },
          inference_geo: null,
          output_tokens_details: null,
          server_tool_use: null,
          service_tier: 'standard',
          speed: null,
        },
      },
    };
  },
  error(status, message): WireResponse {
    const id = requestId();
    return {
      status,
      headers: { 'request-id': id, ...(status === 429 ? { 'retry-after': '1' } : {}) },
      body: { type: 'error', error: { type: ERROR_TYPES[status], message }, request_id: id },
    };
  },
};
