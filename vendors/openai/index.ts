import { VENDOR_ENV_PREFIX } from '../../core/vendor-names.ts';
import { scaled, type VendorPlugin } from '../plugin.ts';
import { oneOfAsAnyOf, toDialect, type Dialect } from '../schema-dialect.ts';
import { createOpenAIClient } from './client.ts';

/** OpenAI's plug-in (vendors/plugin.ts): Chat Completions with strict structured outputs. */

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

export const openai: VendorPlugin<'openai'> = {
  name: 'openai',
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
