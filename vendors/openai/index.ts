import OpenAI from 'openai';
import { VENDOR_ENV_PREFIX } from '../../core/vendor-names.ts';
import {
  billedAnswer,
  DEFAULT_MAX_OUTPUT_TOKENS,
  DEFAULT_TIMEOUT_MS,
  parseAnswer,
  SIMULATED_HEADER,
  unclassified,
  type AdapterOptions,
} from '../answer.ts';
import { abortedError, httpError, invalidOutput, networkError, refused, type VendorError } from '../errors.ts';
import { scaled, type ClientParts, type VendorPlugin } from '../plugin.ts';
import { promptCacheKey } from '../prompt-cache.ts';
import { oneOfAsAnyOf, safeSchemaName, toDialect, type Dialect } from '../schema-dialect.ts';
import type { VisionClient, VisionRequest, VisionResult } from '../types.ts';

/**
 * OpenAI, one vendor's folder (docs/architecture.md, "Adding a vendor"): its plug-in
 * (vendors/plugin.ts: Chat Completions with strict structured outputs, what it bills for an image)
 * and its adapter over the official SDK; its simulated vendor is simulator.ts beside it.
 */

const VENDOR = 'openai' as const;
export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/** High detail: fit within 2048×2048, then shortest side at most 768; 85 tokens plus 170 per 512-px tile. */
const IMAGE = { fitBox: 2048, shortSide: 768, tile: 512, baseTokens: 85, tileTokens: 170 } as const;

/**
 * Strict structured outputs: the documented supported keywords. minLength/maxLength,
 * uniqueItems, minProperties etc. are not accepted in strict mode.
 */
const KEYWORDS = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'anyOf', 'enum', 'const',
  '$ref', '$defs', 'definitions', 'description', 'title',
  'pattern', 'format',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minItems', 'maxItems',
]);
const FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid']);

/** `response_format.json_schema.schema` with `strict: true`. */
const dialect: Dialect = {
  keep: (key, value) => {
    if (key === 'format') return typeof value === 'string' && FORMATS.has(value);
    return KEYWORDS.has(key);
  },
  // Strict mode supports anyOf but not oneOf.
  translate: oneOfAsAnyOf,
  finish: (node) => node,
};

export const plugin: VendorPlugin<typeof VENDOR> = {
  name: VENDOR,
  label: 'OpenAI',
  envPrefix: VENDOR_ENV_PREFIX.openai,
  createClient: createOpenAIClient,
  simPath: '/v1',
  toSchema: (schema) => toDialect(schema, dialect),
  billedSize(width, height) {
    const fitted = scaled({ width, height }, IMAGE.fitBox / Math.max(width, height));
    return scaled(fitted, IMAGE.shortSide / Math.min(fitted.width, fitted.height));
  },
  imageTokens(width, height) {
    const tiles = Math.ceil(width / IMAGE.tile) * Math.ceil(height / IMAGE.tile);
    return IMAGE.baseTokens + IMAGE.tileTokens * tiles;
  },
  // Cached input counts toward its tokens-per-minute limit like any input.
  limitedTokens: (u) => u.inputTokens + u.outputTokens,
};

/**
 * OpenAI via Chat Completions with `response_format: json_schema, strict: true`. Chat Completions
 * rather than the Responses API because every OpenAI-compatible gateway speaks it and we need
 * nothing Responses adds (no tools, no server-side state). The image goes as a data URL at
 * `detail: 'high'`, already resized to exactly what high detail bills (vendors/resize.ts), after the
 * fixed prefix; `prompt_cache_key` names that prefix (vendors/prompt-cache.ts).
 */
export function createOpenAIClient(opts: AdapterOptions, { prepareImage, toSchema }: ClientParts): VisionClient {
  const client = new OpenAI({
    apiKey: opts.apiKey,
    baseURL: opts.baseURL ?? OPENAI_DEFAULT_BASE_URL,
    // Explicit nulls keep the SDK from reading OPENAI_ORG_ID / OPENAI_PROJECT_ID from the env.
    organization: null,
    project: null,
    // Temporal's activity retry policy owns retries; an SDK retry would hide failures from it.
    maxRetries: 0,
    timeout: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  });

  return {
    vendor: VENDOR,
    model: opts.model,
    simulated: opts.simulated,
    async analyze(req: VisionRequest): Promise<VisionResult> {
      // Cancelled before we start: do not spend a resize on it.
      if (req.signal?.aborted) throw abortedError(VENDOR, req.signal.reason);
      const image = await prepareImage(req.image);
      let completion: OpenAI.ChatCompletion;
      let simulatedAnswer: boolean;
      try {
        const { data, response } = await client.chat.completions
          .create(
            {
              model: opts.model,
              // The schema and the system message are the fixed prefix OpenAI caches on its own
              // (from 1024 tokens); the caller's text, then the photo, come after it.
              messages: [
                { role: 'system', content: req.system },
                {
                  role: 'user',
                  content: [
                    { type: 'text', text: req.prompt },
                    {
                      type: 'image_url',
                      image_url: { url: `data:${image.mimeType};base64,${image.data.toString('base64')}`, detail: 'high' },
                    },
                  ],
                },
              ],
              response_format: {
                type: 'json_schema',
                json_schema: { name: safeSchemaName(req.schemaName), schema: toSchema(req.jsonSchema), strict: true },
              },
              max_completion_tokens: req.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS,
              ...(opts.promptCache ? { prompt_cache_key: promptCacheKey(req) } : {}),
            },
            { signal: req.signal },
          )
          .withResponse();
        completion = data;
        simulatedAnswer = response.headers.get(SIMULATED_HEADER) !== null;
      } catch (e) {
        throw fromOpenAIError(e, req.signal);
      }

      const usage = {
        model: completion.model,
        // prompt_tokens counts the cached ones too.
        inputTokens: completion.usage?.prompt_tokens ?? 0,
        cachedInputTokens: completion.usage?.prompt_tokens_details?.cached_tokens ?? 0,
        cacheWriteInputTokens: 0,
        outputTokens: completion.usage?.completion_tokens ?? 0,
      };
      return billedAnswer(VENDOR, usage, { simulated: opts.simulated || simulatedAnswer, image }, () => {
        const choice = completion.choices[0];
        if (!choice) throw invalidOutput(VENDOR, 'response has no choices');
        if (choice.message.refusal) throw refused(VENDOR, `model refused: ${choice.message.refusal}`);
        if (choice.finish_reason === 'content_filter') throw refused(VENDOR, 'answer blocked by the content filter');
        if (choice.finish_reason === 'length') throw invalidOutput(VENDOR, 'answer truncated at the token limit');
        return parseAnswer(VENDOR, choice.message.content);
      });
    },
  };
}

/** OpenAI SDK error classes → VendorError. Order matters: the abort and connection classes extend APIError. */
export function fromOpenAIError(e: unknown, signal: AbortSignal | undefined): VendorError {
  if (e instanceof OpenAI.APIUserAbortError) return abortedError(VENDOR, e);
  if (e instanceof OpenAI.APIConnectionTimeoutError) return networkError(VENDOR, 'request timed out', e);
  if (e instanceof OpenAI.APIConnectionError) return networkError(VENDOR, `connection error: ${e.message}`, e);
  if (e instanceof OpenAI.APIError && typeof e.status === 'number') return httpError(VENDOR, e.status, e.message, e, e.headers);
  return unclassified(VENDOR, e, signal);
}
