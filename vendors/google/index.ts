import { VENDOR_ENV_PREFIX } from '../../core/vendor-names.ts';
import { scaled, type VendorPlugin } from '../plugin.ts';
import { isObject, oneOfAsAnyOf, toDialect, type Dialect } from '../schema-dialect.ts';
import { createGoogleClient } from './client.ts';

/** Google Gemini's plug-in (vendors/plugin.ts): generateContent with `responseJsonSchema`. */

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

export const google: VendorPlugin<'google'> = {
  name: 'google',
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
