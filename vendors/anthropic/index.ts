import { VENDOR_ENV_PREFIX } from '../../core/vendor-names.ts';
import { scaled, type VendorPlugin } from '../plugin.ts';
import { toDialect, type Dialect } from '../schema-dialect.ts';
import { createAnthropicClient } from './client.ts';

/** Anthropic's plug-in (vendors/plugin.ts): Messages with one forced tool. */

/** Long edge at most 1568 px and at most ~1.15 megapixels; tokens ≈ w·h/750. */
const IMAGE = { longEdge: 1568, maxPixels: Math.floor(1.15 * 1024 * 1024), pixelsPerToken: 750 } as const;

/** Tool `input_schema`: full JSON Schema, only `$schema` and pure metadata dropped. */
const dialect: Dialect = {
  keep: () => true,
  translate: (node) => node,
  finish: (node) => node,
};

export const anthropic: VendorPlugin<'anthropic'> = {
  name: 'anthropic',
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
