import Anthropic from '@anthropic-ai/sdk';
import { VENDOR_ENV_PREFIX } from '../../core/vendor-names.ts';
import {
  billedAnswer,
  DEFAULT_MAX_OUTPUT_TOKENS,
  DEFAULT_TIMEOUT_MS,
  SIMULATED_HEADER,
  unclassified,
  type AdapterOptions,
} from '../answer.ts';
import { abortedError, httpError, invalidOutput, networkError, refused, type VendorError } from '../errors.ts';
import { scaled, type ClientParts, type VendorPlugin } from '../plugin.ts';
import { safeSchemaName, toDialect, type Dialect } from '../schema-dialect.ts';
import type { VisionClient, VisionRequest, VisionResult } from '../types.ts';

/**
 * Anthropic, one vendor's folder (docs/architecture.md, "Adding a vendor"): its plug-in
 * (vendors/plugin.ts: Messages with one forced tool, what it bills for an image) and its adapter
 * over the official SDK; its simulated vendor is simulator.ts beside it.
 */

const VENDOR = 'anthropic' as const;
export const ANTHROPIC_DEFAULT_BASE_URL = 'https://api.anthropic.com';

/** Long edge at most 1568 px and at most ~1.15 megapixels; tokens ≈ w·h/750. */
const IMAGE = { longEdge: 1568, maxPixels: Math.floor(1.15 * 1024 * 1024), pixelsPerToken: 750 } as const;

/** Tool `input_schema`: full JSON Schema, only `$schema` and pure metadata dropped. */
const dialect: Dialect = {
  keep: () => true,
  translate: (node) => node,
  finish: (node) => node,
};

export const plugin: VendorPlugin<typeof VENDOR> = {
  name: VENDOR,
  label: 'Anthropic',
  envPrefix: VENDOR_ENV_PREFIX.anthropic,
  createClient: createAnthropicClient,
  simPath: '',
  toSchema: (schema) => toDialect(schema, dialect),
  billedSize(width, height) {
    const factor = Math.min(IMAGE.longEdge / Math.max(width, height), Math.sqrt(IMAGE.maxPixels / (width * height)));
    // Floor, so the pixel cap holds after rounding.
    return scaled({ width, height }, factor, Math.floor);
  },
  imageTokens: (width, height) => Math.ceil((width * height) / IMAGE.pixelsPerToken),
  // Its input-token limit leaves out what is read from the prompt cache; cache writes count.
  limitedTokens: (u) => u.inputTokens - u.cachedInputTokens + u.outputTokens,
};

/**
 * Anthropic Messages with one tool whose `input_schema` is the answer schema, forced with
 * `tool_choice: {type: 'tool'}`: the answer is the tool_use block's `input`, already parsed JSON.
 * The tool is not `strict` (strict tools reject numeric and length bounds our lens schemas use);
 * the answer is checked against the schema here instead. With the prompt cache on, `cache_control`
 * marks the end of the fixed prefix (docs/decisions.md, "Prompt caching").
 */
export function createAnthropicClient(opts: AdapterOptions, { prepareImage, toSchema }: ClientParts): VisionClient {
  const client = new Anthropic({
    apiKey: opts.apiKey,
    baseURL: opts.baseURL ?? ANTHROPIC_DEFAULT_BASE_URL,
    // Temporal's activity retry policy owns retries.
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
      const toolName = safeSchemaName(req.schemaName);
      let message: Anthropic.Message;
      let simulatedAnswer: boolean;
      try {
        const { data, response } = await client.messages
          .create(
            {
              model: opts.model,
              max_tokens: req.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS,
              // Tools, then system, then messages is Anthropic's cache order: the breakpoint on the
              // system block caches the schema (the tool) and the instructions, the fixed prefix.
              system: [{ type: 'text', text: req.system, ...(opts.promptCache ? { cache_control: { type: 'ephemeral' as const } } : {}) }],
              messages: [
                {
                  role: 'user',
                  content: [
                    // Image before text: Anthropic's documented best order for vision prompts. Both
                    // come after the cache breakpoint, so their order does not change what is cached.
                    {
                      type: 'image',
                      source: { type: 'base64', media_type: image.mimeType, data: image.data.toString('base64') },
                    },
                    { type: 'text', text: req.prompt },
                  ],
                },
              ],
              tools: [
                {
                  name: toolName,
                  description: 'Record the analysis of the image. The input is the complete answer.',
                  input_schema: toSchema(req.jsonSchema) as Anthropic.Tool.InputSchema,
                },
              ],
              tool_choice: { type: 'tool', name: toolName },
            },
            { signal: req.signal },
          )
          .withResponse();
        message = data;
        simulatedAnswer = response.headers.get(SIMULATED_HEADER) !== null;
      } catch (e) {
        throw fromAnthropicError(e, req.signal);
      }

      const billed = message.usage;
      const usage = {
        model: message.model,
        // Cache writes and reads are input tokens too (billed at other rates).
        inputTokens: billed.input_tokens + (billed.cache_creation_input_tokens ?? 0) + (billed.cache_read_input_tokens ?? 0),
        cachedInputTokens: billed.cache_read_input_tokens ?? 0,
        cacheWriteInputTokens: billed.cache_creation_input_tokens ?? 0,
        outputTokens: billed.output_tokens,
      };
      return billedAnswer(VENDOR, usage, { simulated: opts.simulated || simulatedAnswer, image }, () => {
        if (message.stop_reason === 'refusal') throw refused(VENDOR, 'model refused to answer');
        if (message.stop_reason === 'max_tokens') throw invalidOutput(VENDOR, 'answer truncated at max_tokens');
        const toolUse = message.content.find(
          (block): block is Anthropic.ToolUseBlock => block.type === 'tool_use' && block.name === toolName,
        );
        if (!toolUse) throw invalidOutput(VENDOR, `no ${toolName} tool call in the answer (stop_reason ${message.stop_reason})`);
        return toolUse.input;
      });
    },
  };
}

/** Anthropic SDK error classes → VendorError (429, 529 overloaded and 5xx are retryable). */
export function fromAnthropicError(e: unknown, signal: AbortSignal | undefined): VendorError {
  if (e instanceof Anthropic.APIUserAbortError) return abortedError(VENDOR, e);
  if (e instanceof Anthropic.APIConnectionTimeoutError) return networkError(VENDOR, 'request timed out', e);
  if (e instanceof Anthropic.APIConnectionError) return networkError(VENDOR, `connection error: ${e.message}`, e);
  if (e instanceof Anthropic.APIError && typeof e.status === 'number') return httpError(VENDOR, e.status, e.message, e, e.headers);
  return unclassified(VENDOR, e, signal);
}
