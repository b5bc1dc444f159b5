import type { VendorName } from '../core/config.ts';
import type { PreparedImage, WorkCopy } from './image-types.ts';

/** One vision call: one image, one instruction, one JSON schema the answer must satisfy. */
export interface VisionRequest {
  /**
   * The original's bytes (any format sharp reads) or its work copy (vendors/resize.ts); the
   * adapter resizes/re-encodes to what the vendor bills. Or the upload itself, prepared for this
   * vendor ahead of the call, sent as it is.
   */
  image: Buffer | WorkCopy | PreparedImage;
  /** System / developer instructions. */
  system: string;
  /** User turn text (sent together with the image). */
  prompt: string;
  /** Name for the structured-output schema (^[a-zA-Z0-9_-]{1,64}$). */
  schemaName: string;
  /** JSON Schema (draft 2020-12 subset, object root) the answer must conform to. */
  jsonSchema: Record<string, unknown>;
  /** Abort the call (activity cancellation / timeout). */
  signal?: AbortSignal;
  /** Cap on answer tokens (Anthropic requires one); the adapter's default when omitted. */
  maxOutputTokens?: number;
}

export interface VisionResult {
  /** Parsed JSON answer, not validated: the caller judges it against what it asked for, once. */
  json: unknown;
  vendor: VendorName;
  /** Model name as reported by the vendor response. */
  model: string;
  /** Human-readable provider label; contains "simulated" when the answer came from sim/. */
  provider: string;
  simulated: boolean;
  /** Every input token billed, the cached ones included (OpenAI's prompt_tokens, Anthropic's three input fields summed). */
  inputTokens: number;
  /** Of inputTokens, those read from the vendor's prompt cache (billed at its cached-input rate). */
  cachedInputTokens: number;
  /** Of inputTokens, those written to the vendor's prompt cache (Anthropic bills writes above the input rate; 0 elsewhere). */
  cacheWriteInputTokens: number;
  outputTokens: number;
  /** Size of the image as uploaded (after the vendor-specific resize) and the tokens it bills. */
  image?: { width: number; height: number; tokens: number };
}

/** What one answered call billed, in the vendor's usage terms. */
export type VendorUsage = Pick<VisionResult, 'model' | 'inputTokens' | 'cachedInputTokens' | 'cacheWriteInputTokens' | 'outputTokens'>;

export interface VisionClient {
  readonly vendor: VendorName;
  readonly model: string;
  readonly simulated: boolean;
  analyze(req: VisionRequest): Promise<VisionResult>;
}
