/**
 * Each vendor accepts a different subset of JSON Schema for structured output. Our lens schemas
 * are plain draft 2020-12 (object root, all properties required, additionalProperties false,
 * nullables as `type: [.., 'null']` or `anyOf [.., {type: 'null'}]`). These functions rewrite a
 * schema into a vendor's dialect without losing meaning: equivalent keywords are translated, and a
 * keyword the vendor does not accept is moved into the node's `description` as a machine-readable
 * hint (`Constraints (JSON Schema): {...}`) so the model still reads it. The adapter validates the
 * answer against the ORIGINAL schema, so a hint the model ignores is caught there.
 */

export type JsonSchema = Record<string, unknown>;

export const CONSTRAINT_HINT_MARKER = 'Constraints (JSON Schema): ';

/** Keywords whose value is one subschema. */
const SUBSCHEMA_KEYS = ['items', 'additionalProperties', 'not', 'contains', 'if', 'then', 'else'] as const;
/** Keywords whose value is an array of subschemas. */
const SUBSCHEMA_ARRAY_KEYS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'] as const;
/** Keywords whose value is a map of name → subschema. */
const SUBSCHEMA_MAP_KEYS = ['properties', '$defs', 'definitions', 'patternProperties'] as const;

/** Pure metadata that no vendor needs. */
const DROP = new Set(['$schema', '$comment', 'examples', 'default', 'readOnly', 'writeOnly', 'deprecated']);

/**
 * OpenAI strict structured outputs: the documented supported keywords. minLength/maxLength,
 * uniqueItems, minProperties etc. are not accepted in strict mode.
 */
const OPENAI_KEYWORDS = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'anyOf', 'enum', 'const',
  '$ref', '$defs', 'definitions', 'description', 'title',
  'pattern', 'format',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minItems', 'maxItems',
]);
const OPENAI_FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid']);

/**
 * Gemini `responseJsonSchema`: the documented subset (`propertyOrdering` is Gemini's own keyword).
 * No pattern, no string lengths, no const, no exclusive bounds.
 */
const GEMINI_KEYWORDS = new Set([
  '$id', '$defs', '$ref', '$anchor', 'type', 'format', 'title', 'description', 'enum', 'items',
  'prefixItems', 'minItems', 'maxItems', 'minimum', 'maximum', 'anyOf', 'properties',
  'additionalProperties', 'required', 'propertyOrdering',
]);

interface Dialect {
  keep(key: string, value: unknown, node: JsonSchema): boolean;
  /** Rewrites before filtering (e.g. const → enum); returns the node to filter. */
  translate(node: JsonSchema): JsonSchema;
  /** Additions after filtering (e.g. Gemini's propertyOrdering). */
  finish(node: JsonSchema): JsonSchema;
}

const isObject = (v: unknown): v is JsonSchema => typeof v === 'object' && v !== null && !Array.isArray(v);

function withHint(node: JsonSchema, hint: JsonSchema): JsonSchema {
  if (Object.keys(hint).length === 0) return node;
  const text = CONSTRAINT_HINT_MARKER + JSON.stringify(hint);
  const description = typeof node.description === 'string' && node.description !== '' ? `${node.description} ${text}` : text;
  return { ...node, description };
}

function rewrite(schema: unknown, dialect: Dialect): unknown {
  if (!isObject(schema)) return schema;
  const node = dialect.translate(schema);
  const out: JsonSchema = {};
  const hint: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROP.has(key)) continue;
    let next: unknown = value;
    if ((SUBSCHEMA_KEYS as readonly string[]).includes(key)) next = rewrite(value, dialect);
    else if ((SUBSCHEMA_ARRAY_KEYS as readonly string[]).includes(key) && Array.isArray(value))
      next = value.map((v) => rewrite(v, dialect));
    else if ((SUBSCHEMA_MAP_KEYS as readonly string[]).includes(key) && isObject(value))
      next = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v, dialect)]));
    if (dialect.keep(key, next, node)) out[key] = next;
    else hint[key] = next;
  }
  return dialect.finish(withHint(out, hint));
}

const openaiDialect: Dialect = {
  keep: (key, value) => {
    if (key === 'format') return typeof value === 'string' && OPENAI_FORMATS.has(value);
    return OPENAI_KEYWORDS.has(key);
  },
  translate: (node) => {
    // Strict mode supports anyOf but not oneOf; our schemas never rely on "exactly one".
    if (Array.isArray(node.oneOf) && node.anyOf === undefined) {
      const { oneOf, ...rest } = node;
      return { ...rest, anyOf: oneOf };
    }
    return node;
  },
  finish: (node) => node,
};

const geminiDialect: Dialect = {
  keep: (key) => GEMINI_KEYWORDS.has(key),
  translate: (node) => {
    let out = node;
    if (Array.isArray(out.oneOf) && out.anyOf === undefined) {
      const { oneOf, ...rest } = out;
      out = { ...rest, anyOf: oneOf };
    }
    if ('const' in out && out.enum === undefined) {
      const { const: value, ...rest } = out;
      out = { ...rest, enum: [value] };
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

const anthropicDialect: Dialect = {
  keep: () => true,
  translate: (node) => node,
  finish: (node) => node,
};

/** OpenAI `response_format.json_schema.schema` with `strict: true`. */
export function toOpenAISchema(schema: JsonSchema): JsonSchema {
  return rewrite(schema, openaiDialect) as JsonSchema;
}

/** Gemini `generationConfig.responseJsonSchema`. */
export function toGeminiSchema(schema: JsonSchema): JsonSchema {
  return rewrite(schema, geminiDialect) as JsonSchema;
}

/** Anthropic tool `input_schema`: full JSON Schema, only `$schema` and pure metadata dropped. */
export function toAnthropicSchema(schema: JsonSchema): JsonSchema {
  return rewrite(schema, anthropicDialect) as JsonSchema;
}

/** Reads a constraint hint back out of a description (the sim honours it like a model would). */
export function readConstraintHint(description: unknown): JsonSchema | undefined {
  if (typeof description !== 'string') return undefined;
  const at = description.lastIndexOf(CONSTRAINT_HINT_MARKER);
  if (at < 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(description.slice(at + CONSTRAINT_HINT_MARKER.length));
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** Tool / schema names must match ^[a-zA-Z0-9_-]{1,64}$ at all three vendors. */
export function safeSchemaName(name: string): string {
  const cleaned = name.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64);
  return cleaned === '' ? 'output' : cleaned;
}
