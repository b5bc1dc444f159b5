import { VENDOR_ENV_PREFIX, VENDOR_NAMES, type VendorName } from '../core/vendor-names.ts';
import type { AdapterOptions } from './answer.ts';
import { createAnthropicClient } from './anthropic.ts';
import { createGoogleClient } from './google.ts';
import { createOpenAIClient } from './openai.ts';
import { billedSize, imageTokens, type Size } from './resize.ts';
import { toAnthropicSchema, toGeminiSchema, toOpenAISchema, type JsonSchema } from './schema-dialect.ts';
import type { VisionClient } from './types.ts';

/**
 * The vendor registry: each vendor's plug-in, keyed by the names of core/vendor-names.ts (the one
 * list of names: config, workflow, activities, log redaction and simulator derive from it).
 * docs/architecture.md, "Adding a vendor", lists what a new vendor touches.
 */
export interface VendorPlugin {
  readonly name: VendorName;
  /** Prefix of its environment variables (`<PREFIX>_API_KEY`, `_BASE_URL`, `_MODEL`, `_RPM`, `_TPM`). */
  readonly envPrefix: string;
  /** The SDK client over the vendor's official SDK. */
  createClient(opts: AdapterOptions): VisionClient;
  /**
   * The path under the simulator's root its SDK must be pointed at (the openai SDK appends
   * `/chat/completions`, so it needs `/v1`; the anthropic SDK appends `/v1/messages`;
   * @google/genai appends `/v1beta/models/...`).
   */
  readonly simPath: string;
  /** The JSON Schema dialect its structured output accepts (vendors/schema-dialect.ts). */
  toSchema(schema: JsonSchema): JsonSchema;
  /** Size it processes and bills for an image of this oriented size (vendors/resize.ts). */
  billedSize(width: number, height: number): Size;
  /** Input tokens it bills for an image of exactly this size. */
  imageTokens(width: number, height: number): number;
}

function plugin(name: VendorName, p: Pick<VendorPlugin, 'createClient' | 'simPath' | 'toSchema'>): VendorPlugin {
  return {
    name,
    envPrefix: VENDOR_ENV_PREFIX[name],
    ...p,
    billedSize: (w, h) => billedSize(name, w, h),
    imageTokens: (w, h) => imageTokens(name, w, h),
  };
}

export const VENDOR_REGISTRY: { readonly [V in VendorName]: VendorPlugin } = {
  openai: plugin('openai', { createClient: createOpenAIClient, simPath: '/v1', toSchema: toOpenAISchema }),
  anthropic: plugin('anthropic', { createClient: createAnthropicClient, simPath: '', toSchema: toAnthropicSchema }),
  google: plugin('google', { createClient: createGoogleClient, simPath: '', toSchema: toGeminiSchema }),
};

/** The registry's plug-ins in the order of core/vendor-names.ts. */
export const VENDOR_PLUGINS: readonly VendorPlugin[] = VENDOR_NAMES.map((v) => VENDOR_REGISTRY[v]);
