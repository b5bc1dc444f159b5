import {
  decodeBase64Image,
  isObject,
  ProtocolError,
  randomId,
  requireObject,
  walkSchema,
  type ErrorStatus,
  type PromptSegment,
  type Protocol,
  type SimCall,
  type WireResponse,
} from '../../tools/sim/protocols/common.ts';

/**
 * Gemini Developer API: `POST /v1beta/models/{model}:generateContent` (also /v1), structured
 * output via `generationConfig.responseMimeType: 'application/json'` + `responseJsonSchema`.
 * The schema may use only the JSON Schema subset Google documents for responseJsonSchema; the sim
 * refuses anything else, so an adapter that forgets to translate fails here, not in production.
 *
 * The simulated vendor (tools/sim), kept in the vendor's folder but not product code: only the
 * simulator loads it (tools/sim/protocols/index.ts), it imports nothing of the product, and what it
 * bills is its own reading of the vendor's published rules, apart from index.ts beside it
 * (.dependency-cruiser.cjs, docs/architecture.md "Adding a vendor").
 */

const JSON_SCHEMA_SUBSET = new Set([
  '$id', '$defs', '$ref', '$anchor', 'type', 'format', 'title', 'description', 'enum', 'items', 'prefixItems',
  'minItems', 'maxItems', 'minimum', 'maximum', 'anyOf', 'oneOf', 'properties', 'additionalProperties', 'required',
  'propertyOrdering',
]);

/** REST accepts both the proto JSON names (camelCase) and the proto field names (snake_case). */
const field = (o: Record<string, unknown>, camel: string, snake: string): unknown => o[camel] ?? o[snake];

function partsText(content: unknown): string {
  if (!isObject(content) || !Array.isArray(content.parts)) return '';
  return content.parts
    .filter((p): p is { text: string } => isObject(p) && typeof p.text === 'string')
    .map((p) => p.text)
    .join('\n');
}

function parse(raw: unknown, pathModel: string | undefined): SimCall {
  const body = requireObject(raw, 'body');
  if (!pathModel) throw new ProtocolError(400, 'model is required in the path');
  if (!Array.isArray(body.contents) || body.contents.length === 0) {
    throw new ProtocolError(400, '* GenerateContentRequest.contents: contents is not specified');
  }
  const system = partsText(field(body, 'systemInstruction', 'system_instruction'));
  const texts: string[] = [system];
  const images: Buffer[] = [];
  const contentSegments: PromptSegment[] = [];
  body.contents.forEach((c: unknown, i: number) => {
    const content = requireObject(c, `contents[${i}]`);
    texts.push(partsText(content));
    if (!Array.isArray(content.parts)) return;
    content.parts.forEach((p: unknown, j: number) => {
      if (!isObject(p)) return;
      if (field(p, 'fileData', 'file_data') !== undefined) {
        throw new ProtocolError(400, `contents[${i}].parts[${j}].fileData: the simulator accepts inlineData only`);
      }
      if (typeof p.text === 'string') contentSegments.push({ text: p.text });
      const inline = field(p, 'inlineData', 'inline_data');
      if (isObject(inline)) {
        contentSegments.push({ image: images.length });
        images.push(decodeBase64Image(inline.data, `contents[${i}].parts[${j}].inlineData.data`));
      }
    });
  });

  const config = isObject(field(body, 'generationConfig', 'generation_config'))
    ? (field(body, 'generationConfig', 'generation_config') as Record<string, unknown>)
    : {};
  const mime = field(config, 'responseMimeType', 'response_mime_type');
  const schema = field(config, 'responseJsonSchema', 'response_json_schema');
  if (mime !== 'application/json' || !isObject(schema)) {
    throw new ProtocolError(
      400,
      'The simulator only answers structured output: set generationConfig.responseMimeType "application/json" and responseJsonSchema.',
    );
  }
  let problem: string | undefined;
  walkSchema(schema, (node, path) => {
    const bad = problem ? undefined : Object.keys(node).find((k) => !JSON_SCHEMA_SUBSET.has(k));
    if (bad) problem = `Invalid JSON payload received. Unknown name "${bad}" at 'generation_config.response_json_schema${path.slice(1)}'.`;
  });
  if (problem) throw new ProtocolError(400, problem);
  return {
    model: pathModel,
    schema,
    schemaName: 'response',
    images,
    promptText: [...texts, JSON.stringify(schema)].join('\n'),
    answerAs: 'text',
    // Google does not say where the schema sits in what implicit caching compares; the sim reads
    // it with the system instruction, before the contents.
    segments: [...(system ? [{ text: system }] : []), { text: JSON.stringify(schema) }, ...contentSegments],
    cacheHint: null,
  };
}

const STATUS: Record<ErrorStatus, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  413: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
};

export const protocol: Protocol<'google'> = {
  vendor: 'google',
  route(path) {
    const m = /^\/(?:v1|v1beta|v1alpha)\/models\/([^/:]+):generateContent$/.exec(path);
    return m ? { model: decodeURIComponent(m[1]!) } : undefined;
  },
  baseURLHint: '@google/genai <sim>',
  hasKey: (req, url) => Boolean(req.headers['x-goog-api-key']) || url.searchParams.has('key'),
  missingKeyStatus: 403,
  /**
   * Token guide, images: both sides at most 384 px cost 258 tokens; a larger image is cut into
   * 768 × 768 tiles, 258 tokens each. Gemini does not bill a smaller size than it got.
   */
  imageTokens(received) {
    if (received.width <= 384 && received.height <= 384) return 258;
    return 258 * Math.ceil(received.width / 768) * Math.ceil(received.height / 768);
  },
  /** Gemini 2.5 implicit caching: automatic from 1024 tokens (2.5 Flash's minimum), reported in `cachedContentTokenCount`. */
  cache: { automatic: true, minTokens: 1024, step: 1, ttlMs: 5 * 60_000 },
  limitedTokens: (u) => u.inputTokens + u.outputTokens,
  /** Gemini says how long to wait in the error body (google.rpc.RetryInfo), as the real API does. */
  withRetryDelay(wire, retryAfterMs) {
    const body = wire.body as { error: Record<string, unknown> };
    const details = [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${Math.ceil(retryAfterMs / 1000)}s` }];
    return { ...wire, body: { error: { ...body.error, details } } };
  },
  parse,
  success(call, answer, usage): WireResponse {
    const text = 'raw' in answer ? answer.raw : JSON.stringify(answer.json);
    return {
      status: 200,
      body: {
        candidates: [{ content: { parts: [{ text }], role: 'model' }, finishReason: 'STOP', index: 0 }],
        usageMetadata: {
          promptTokenCount: usage.inputTokens,
          candidatesTokenCount: usage.outputTokens,
          totalTokenCount: usage.inputTokens + usage.outputTokens,
          ...(usage.cachedTokens > 0 ? { cachedContentTokenCount: usage.cachedTokens } : {}),
          promptTokensDetails: [
            { modality: 'TEXT', tokenCount: usage.textTokens },
            ...(usage.imageTokens > 0 ? [{ modality: 'IMAGE', tokenCount: usage.imageTokens }] : []),
          ],
        },
        modelVersion: call.model,
        responseId: randomId(22),
      },
    };
  },
  error(status, message): WireResponse {
    return { status, body: { error: { code: status, message, status: STATUS[status] } } };
  },
};
