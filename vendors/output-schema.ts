import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

/**
 * Checks a vendor answer against the JSON schema that was requested. Native structured output is
 * a strong hint, not a guarantee (Anthropic tools are not strict, Gemini ignores some keywords),
 * so an answer that does not conform is the vendor's failure (`invalid_output`), found here rather
 * than deep inside a lens. The sim uses the same check on what it generates.
 */

// ajv-formats is CommonJS with `exports.default`; under NodeNext the default import is the module.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: true });
addFormats(ajv);

/**
 * Compiled validators by schema text. Callers may build a fresh schema object per call, and ajv
 * keeps every compiled schema object forever, so the cache is bounded and evictions are removed
 * from ajv too.
 */
const MAX_CACHED = 128;
const cache = new Map<string, { schema: Record<string, unknown>; validate: ValidateFunction }>();

function compiled(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit.validate;
  }
  const validate = ajv.compile(schema);
  cache.set(key, { schema, validate });
  if (cache.size > MAX_CACHED) {
    const [oldestKey, oldest] = cache.entries().next().value as [string, { schema: Record<string, unknown> }];
    cache.delete(oldestKey);
    ajv.removeSchema(oldest.schema);
  }
  return validate;
}

export interface SchemaCheck {
  ok: boolean;
  /** Human-readable violations, at most a handful. */
  errors: string[];
}

export function checkAgainstSchema(schema: Record<string, unknown>, value: unknown): SchemaCheck {
  const validate = compiled(schema);
  if (validate(value)) return { ok: true, errors: [] };
  return { ok: false, errors: (validate.errors ?? []).slice(0, 5).map(describe) };
}

function describe(e: ErrorObject): string {
  return `${e.instancePath || '(root)'} ${e.message ?? e.keyword}`;
}
