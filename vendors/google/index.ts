import { ApiError, GoogleGenAI, type GenerateContentResponse } from '@google/genai';
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
import { isObject, oneOfAsAnyOf, toDialect, type Dialect } from '../schema-dialect.ts';
import type { VisionClient, VisionRequest, VisionResult } from '../types.ts';

/**
 * Google Gemini, one vendor's folder (docs/architecture.md, "Adding a vendor"): its plug-in
 * (vendors/plugin.ts: generateContent with `responseJsonSchema`, what it bills for an image) and
 * its adapter over the official SDK; its simulated vendor is simulator.ts beside it.
 */

const VENDOR = 'google' as const;
export const GEMINI_DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com';

/**
 * Both sides ≤ 384 px cost one flat 258-token unit, anything larger is cut into 768×768 tiles of
 * 258 tokens each. Nothing is free beyond a size, so we choose the cap: at most 2×2 tiles (long
 * edge 1536), a detail level comparable to the other two vendors.
 */
const IMAGE = { smallSide: 384, tile: 768, tileTokens: 258, longEdge: 1536 } as const;

/**
 * `responseJsonSchema`: the documented subset (`propertyOrdering` is Gemini's own keyword).
 * No pattern, no string lengths, no const, no exclusive bounds.
 */
const KEYWORDS = new Set([
  '$id', '$defs', '$ref', '$anchor', 'type', 'format', 'title', 'description', 'enum', 'items',
  'prefixItems', 'minItems', 'maxItems', 'minimum', 'maximum', 'anyOf', 'properties',
  'additionalProperties', 'required', 'propertyOrdering',
]);

/** `generationConfig.responseJsonSchema`. */
const dialect: Dialect = {
  keep: (key) => KEYWORDS.has(key),
  translate: (node) => {
    const out = oneOfAsAnyOf(node);
    if ('const' in out && out.enum === undefined) {
      const { const: value, ...rest } = out;
      return { ...rest, enum: [value] };
    }
    return out;
  },
  finish: (node) => {
    // Gemini answers properties in this order; without it some models sort keys alphabetically.
    if (isObject(node.properties) && node.propertyOrdering === undefined) {
      return { ...node, propertyOrdering: Object.keys(node.properties) };
    }
    return node;
  },
};

export const plugin: VendorPlugin<typeof VENDOR> = {
  name: VENDOR,
  label: 'Google',
  envPrefix: VENDOR_ENV_PREFIX.google,
  createClient: createGoogleClient,
  simPath: '',
  toSchema: (schema) => toDialect(schema, dialect),
  billedSize: (width, height) => scaled({ width, height }, IMAGE.longEdge / Math.max(width, height)),
  imageTokens(width, height) {
    if (width <= IMAGE.smallSide && height <= IMAGE.smallSide) return IMAGE.tileTokens;
    return Math.ceil(width / IMAGE.tile) * Math.ceil(height / IMAGE.tile) * IMAGE.tileTokens;
  },
  // Cached input counts toward its tokens-per-minute limit like any input (its limits say nothing else).
  limitedTokens: (u) => u.inputTokens + u.outputTokens,
};

/** Finish reasons that mean the vendor's policy stopped the answer, not a broken answer. */
const POLICY_STOPS = new Set(['SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY', 'LANGUAGE']);

/**
 * Gemini Developer API via @google/genai `models.generateContent` with
 * `responseMimeType: 'application/json'` and `responseJsonSchema` (the JSON Schema field, not the
 * older OpenAPI-subset `responseSchema`), translated to Gemini's keyword subset. No caching hint:
 * Gemini 2.5 caches repeated prefixes implicitly, and explicit context caches bill storage by the
 * hour (docs/decisions.md, "Prompt caching").
 */
export function createGoogleClient(opts: AdapterOptions, { prepareImage, toSchema }: ClientParts): VisionClient {
  const ai = new GoogleGenAI({
    apiKey: opts.apiKey,
    // Explicit, so GOOGLE_GENAI_USE_VERTEXAI in the environment cannot switch the backend.
    vertexai: false,
    httpOptions: {
      baseUrl: opts.baseURL ?? GEMINI_DEFAULT_BASE_URL,
      timeout: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      // One attempt: Temporal's activity retry policy owns retries.
      retryOptions: { attempts: 1 },
    },
  });

  return {
    vendor: VENDOR,
    model: opts.model,
    simulated: opts.simulated,
    async analyze(req: VisionRequest): Promise<VisionResult> {
      // Cancelled before we start: do not spend a resize on it.
      if (req.signal?.aborted) throw abortedError(VENDOR, req.signal.reason);
      const image = await prepareImage(req.image);
      let response: GenerateContentResponse;
      try {
        response = await ai.models.generateContent({
          model: opts.model,
          contents: [
            {
              role: 'user',
              // After the system instruction (the fixed prefix Gemini 2.5 caches implicitly): the
              // caller's text, then the photo.
              parts: [{ text: req.prompt }, { inlineData: { mimeType: image.mimeType, data: image.data.toString('base64') } }],
            },
          ],
          config: {
            systemInstruction: req.system,
            responseMimeType: 'application/json',
            responseJsonSchema: toSchema(req.jsonSchema),
            maxOutputTokens: req.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS,
            abortSignal: req.signal,
          },
        });
      } catch (e) {
        throw fromGoogleError(e, req.signal);
      }

      const billed = response.usageMetadata;
      const usage = {
        model: response.modelVersion ?? opts.model,
        // promptTokenCount counts the cached ones too.
        inputTokens: (billed?.promptTokenCount ?? 0) + (billed?.toolUsePromptTokenCount ?? 0),
        cachedInputTokens: billed?.cachedContentTokenCount ?? 0,
        cacheWriteInputTokens: 0,
        // Thinking tokens are billed as output.
        outputTokens: (billed?.candidatesTokenCount ?? 0) + (billed?.thoughtsTokenCount ?? 0),
      };
      const simulated = opts.simulated || response.sdkHttpResponse?.headers?.[SIMULATED_HEADER] !== undefined;
      return billedAnswer(VENDOR, usage, { simulated, image }, () => {
        const blocked = response.promptFeedback?.blockReason;
        if (blocked) throw refused(VENDOR, `prompt blocked: ${blocked}`);
        const candidate = response.candidates?.[0];
        if (!candidate) throw invalidOutput(VENDOR, 'response has no candidates');
        const finish = candidate.finishReason;
        if (finish && POLICY_STOPS.has(finish)) throw refused(VENDOR, `answer stopped by policy: ${finish}`);
        if (finish === 'MAX_TOKENS') throw invalidOutput(VENDOR, 'answer truncated at maxOutputTokens');
        // Thought summaries are parts too; the answer is the non-thought text.
        const text = (candidate.content?.parts ?? [])
          .filter((p) => typeof p.text === 'string' && !p.thought)
          .map((p) => p.text)
          .join('');
        return parseAnswer(VENDOR, text);
      });
    },
  };
}

/**
 * @google/genai errors → VendorError. The SDK throws `ApiError` (with `status`) for any HTTP error
 * and lets fetch errors through as they are: an AbortError for our signal, a TimeoutError for its
 * own timeout, a TypeError for network failures.
 */
export function fromGoogleError(e: unknown, signal: AbortSignal | undefined): VendorError {
  if (signal?.aborted) return abortedError(VENDOR, e);
  if (e instanceof ApiError) return httpError(VENDOR, e.status, e.message, e);
  if (e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError')) {
    return networkError(VENDOR, 'request timed out', e);
  }
  return unclassified(VENDOR, e, signal);
}
