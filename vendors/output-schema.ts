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

const cache = new WeakMap<object, ValidateFunction>();

function compiled(schema: Record<string, unknown>): ValidateFunction {
  let validate = cache.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    cache.set(schema, validate);
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
