import type { VendorName } from '../core/vendor-names.ts';
import type { AdapterOptions } from './answer.ts';
import type { Size } from '../images/vendor-pixels.ts';
import type { PreparedImage, WorkCopy } from './image-types.ts';
import type { JsonSchema } from './schema-dialect.ts';
import type { VendorUsage, VisionClient } from './types.ts';

/**
 * What a vendor is to the product: one folder, `vendors/<vendor>/`, whose `index.ts` exports this
 * plug-in as `plugin` (its client, the adapter over the vendor's SDK, in the same file), loaded by
 * name by vendors/registry.ts (docs/architecture.md, "Adding a vendor"). The modules shared by
 * every vendor read these parts instead of naming vendors: vendors/resize.ts the billed size and
 * tokens, vendors/index.ts the client factory and the simulator path, vendors/settings.ts the
 * variable prefix.
 */
export interface VendorPlugin<V extends VendorName = VendorName> {
  readonly name: V;
  /** How the operator's documents name it (README.md's configuration table). */
  readonly label: string;
  /** Prefix of its environment variables (`<PREFIX>_API_KEY`, `_BASE_URL`, `_MODEL`, `_RPM`, `_TPM`), from core/vendor-names.ts. */
  readonly envPrefix: string;
  /** The SDK client over the vendor's official SDK, given what it shares with the other vendors' code. */
  createClient(opts: AdapterOptions, parts: ClientParts): VisionClient;
  /**
   * The path under the simulator's root its SDK must be pointed at (the openai SDK appends
   * `/chat/completions`, so it needs `/v1`; the anthropic SDK appends `/v1/messages`;
   * @google/genai appends `/v1beta/models/...`).
   */
  readonly simPath: string;
  /** The JSON Schema dialect its structured output accepts (vendors/schema-dialect.ts rewrites into it). */
  toSchema: ToSchema;
  /** Size it processes and bills for an image of this oriented size (never larger). */
  billedSize(width: number, height: number): Size;
  /** Input tokens it bills for an image of exactly this size (no further downscaling). */
  imageTokens(width: number, height: number): number;
  /**
   * Of a call's tokens, those its tokens-per-minute limit counts (what the shared vendor budget,
   * vendors/budget.ts, settles a call with): the vendors differ on prompt-cache reads.
   */
  limitedTokens(usage: VendorUsage): number;
}

export type ToSchema = (schema: JsonSchema) => JsonSchema;

/** The vendor's upload made from an original or its work copy, or one prepared already (vendors/resize.ts `prepareImage`). */
export type PrepareImage = (image: Buffer | WorkCopy | PreparedImage) => Promise<PreparedImage>;

/**
 * What a client is handed rather than importing: its image preparation (vendors/resize.ts reads
 * every plug-in's billed size for the work copy, so a client importing it would close a circle)
 * and its schema dialect.
 */
export interface ClientParts {
  prepareImage: PrepareImage;
  toSchema: ToSchema;
}

/** `size` scaled by `factor` when that shrinks it (never enlarged), each side at least 1 px. */
export function scaled(size: Size, factor: number, round: (n: number) => number = Math.round): Size {
  if (factor >= 1) return size;
  return { width: Math.max(1, round(size.width * factor)), height: Math.max(1, round(size.height * factor)) };
}
