import { ApiError, GoogleGenAI, type GenerateContentResponse } from '@google/genai';
import type { VisionClient, VisionRequest, VisionResult } from '../types.ts';
import { abortedError, httpError, invalidOutput, networkError, refused, type VendorError } from '../errors.ts';
import type { ClientParts } from '../plugin.ts';
import {
  billedAnswer,
  DEFAULT_MAX_OUTPUT_TOKENS,
  DEFAULT_TIMEOUT_MS,
  parseAnswer,
  SIMULATED_HEADER,
  unclassified,
  type AdapterOptions,
} from '../answer.ts';

const VENDOR = 'google' as const;
export const GEMINI_DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com';

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
