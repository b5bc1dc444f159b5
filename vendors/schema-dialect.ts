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

/** A vendor's dialect (each vendor's is in its folder, `vendors/<vendor>/index.ts`). */
export interface Dialect {
  keep(key: string, value: unknown, node: JsonSchema): boolean;
  /** Rewrites before filtering (e.g. const → enum); returns the node to filter. */
  translate(node: JsonSchema): JsonSchema;
  /** Additions after filtering (e.g. Gemini's propertyOrdering). */
  finish(node: JsonSchema): JsonSchema;
}

export const isObject = (v: unknown): v is JsonSchema => typeof v === 'object' && v !== null && !Array.isArray(v);

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

/** `schema` rewritten into `dialect`: what the vendor's plug-in sends as its structured-output schema. */
export function toDialect(schema: JsonSchema, dialect: Dialect): JsonSchema {
  return rewrite(schema, dialect) as JsonSchema;
}

/** `oneOf` as `anyOf` (strict OpenAI and Gemini take anyOf only; our schemas never rely on "exactly one"). */
export function oneOfAsAnyOf(node: JsonSchema): JsonSchema {
  if (Array.isArray(node.oneOf) && node.anyOf === undefined) {
    const { oneOf, ...rest } = node;
    return { ...rest, anyOf: oneOf };
  }
  return node;
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
