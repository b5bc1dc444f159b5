import { createHash } from 'node:crypto';
import { z } from 'zod';

/**
 * Bespoke extraction schemas (docs/contract.md "POST /v1/analyze and /v2/analyze", `extract.schema`): an object-rooted JSON
 * Schema subset — `type`, `description`, `enum`, `items`, `properties`, `required` — with limits
 * that keep a vendor call sane. Limits (documented in docs/decisions.md):
 */
export const BESPOKE_LIMITS = {
  maxDepth: 5,
  maxProperties: 100,
  maxEnumValues: 50,
  maxDescriptionChars: 500,
  maxSerializedChars: 16_000,
} as const;

const PROPERTY_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const NODE_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array'] as const;

export interface BespokeNode {
  type: (typeof NODE_TYPES)[number];
  description?: string;
  enum?: Array<string | number>;
  items?: BespokeNode;
  properties?: Record<string, BespokeNode>;
  required?: string[];
}

export interface BespokeSchema {
  type: 'object';
  properties: Record<string, BespokeNode>;
  required?: string[];
  description?: string;
}

const nodeSchema: z.ZodType<BespokeNode> = z.lazy(() =>
  z.strictObject({
    type: z.enum(NODE_TYPES),
    description: z.string().max(BESPOKE_LIMITS.maxDescriptionChars).optional(),
    enum: z.array(z.union([z.string().max(200), z.number()])).min(1).max(BESPOKE_LIMITS.maxEnumValues).optional(),
    items: nodeSchema.optional(),
    properties: z.record(z.string().regex(PROPERTY_NAME, 'property names are letters, digits and _ (max 64)'), nodeSchema).optional(),
    required: z.array(z.string()).optional(),
  }),
);

const schemaShape = z.strictObject({
  type: z.literal('object'),
  description: z.string().max(BESPOKE_LIMITS.maxDescriptionChars).optional(),
  properties: z.record(z.string().regex(PROPERTY_NAME, 'property names are letters, digits and _ (max 64)'), nodeSchema),
  required: z.array(z.string()).optional(),
});

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The path of the first node nested deeper than maxDepth (the schema object is level 1), or null.
 * Iterative, so any nesting a request body can carry is measured without growing the call stack:
 * the recursive validators below only ever see schemas within the limit.
 */
export function firstTooDeep(raw: unknown): Array<string> | null {
  const stack: Array<{ node: unknown; path: string[]; depth: number }> = [{ node: raw, path: [], depth: 1 }];
  while (stack.length > 0) {
    const { node, path, depth } = stack.pop()!;
    if (!isRecord(node)) continue;
    if (depth > BESPOKE_LIMITS.maxDepth) return path;
    if (isRecord(node.properties)) {
      for (const name of Object.keys(node.properties)) stack.push({ node: node.properties[name], path: [...path, 'properties', name], depth: depth + 1 });
    }
    if (Object.hasOwn(node, 'items')) stack.push({ node: node.items, path: [...path, 'items'], depth: depth + 1 });
  }
  return null;
}

/** The wire schema of `extract.schema` (also documented in OpenAPI); depth is checked before the recursive parse. */
export const bespokeSchemaInput = z
  .unknown()
  .superRefine((raw, ctx) => {
    const path = firstTooDeep(raw);
    if (path) ctx.addIssue({ code: 'custom', path, message: `nested deeper than ${BESPOKE_LIMITS.maxDepth} levels` });
  })
  .pipe(schemaShape);

/** Structural checks zod cannot express: depth, size, consistency. Returns problems, or []. */
export function checkBespokeSchema(schema: BespokeSchema): string[] {
  const problems: string[] = [];
  let count = 0;
  const visit = (node: BespokeNode | BespokeSchema, path: string, depth: number) => {
    if (depth > BESPOKE_LIMITS.maxDepth) {
      problems.push(`${path}: nested deeper than ${BESPOKE_LIMITS.maxDepth} levels`);
      return;
    }
    if (node.type === 'object') {
      const props = node.properties ?? {};
      if (!Object.keys(props).length) problems.push(`${path}: an object needs at least one property`);
      for (const r of node.required ?? []) if (!Object.hasOwn(props, r)) problems.push(`${path}.required: "${r}" is not a property`);
      for (const [name, child] of Object.entries(props)) {
        count++;
        visit(child, `${path}.properties.${name}`, depth + 1);
      }
    } else {
      if (node.properties) problems.push(`${path}: properties only on type object`);
      if (node.required) problems.push(`${path}: required only on type object`);
    }
    if (node.type === 'array') {
      if (!('items' in node) || !node.items) problems.push(`${path}: an array needs items`);
      else visit(node.items, `${path}.items`, depth + 1);
    } else if ('items' in node && node.items) problems.push(`${path}: items only on type array`);
    if ('enum' in node && node.enum) {
      const ok = node.enum.every((v) => (node.type === 'string' ? typeof v === 'string' : node.type === 'number' || node.type === 'integer' ? typeof v === 'number' : false));
      if (!ok) problems.push(`${path}.enum: values must match type ${node.type}`);
    }
  };
  visit(schema, 'extract.schema', 1);
  if (count > BESPOKE_LIMITS.maxProperties) problems.push(`extract.schema: ${count} properties, at most ${BESPOKE_LIMITS.maxProperties}`);
  if (JSON.stringify(schema).length > BESPOKE_LIMITS.maxSerializedChars) problems.push(`extract.schema: larger than ${BESPOKE_LIMITS.maxSerializedChars} characters`);
  return problems;
}

/** Keys sorted at every level: the same schema always hashes the same. */
function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k])]));
  return v;
}

export function bespokeSchemaHash(schema: BespokeSchema): string {
  return createHash('sha256').update(JSON.stringify(canonical(schema))).digest('hex');
}

/**
 * The strict dialect vendors need (every property required, no extra properties): a property the
 * caller did not require becomes nullable, so "not found" is an explicit null.
 */
export function toStrictJsonSchema(node: BespokeNode | BespokeSchema, nullable = false): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (node.description) out.description = node.description;
  if (node.type === 'object') {
    const props = node.properties ?? {};
    const required = new Set(node.required ?? []);
    out.type = nullable ? ['object', 'null'] : 'object';
    out.properties = Object.fromEntries(Object.entries(props).map(([k, child]) => [k, toStrictJsonSchema(child, !required.has(k))]));
    out.required = Object.keys(props);
    out.additionalProperties = false;
  } else if (node.type === 'array') {
    out.type = nullable ? ['array', 'null'] : 'array';
    out.items = toStrictJsonSchema((node as BespokeNode).items!);
  } else {
    out.type = nullable ? [node.type, 'null'] : node.type;
    if ((node as BespokeNode).enum) out.enum = nullable ? [...(node as BespokeNode).enum!, null] : (node as BespokeNode).enum;
  }
  return out;
}

/**
 * What a vendor drafts from `extract.prompt`: a flat list of fields (structured output cannot be
 * recursive), compiled by us into a BespokeSchema.
 */
export const draftedFieldsSchema = z.strictObject({
  fields: z
    .array(
      z.strictObject({
        name: z.string().regex(PROPERTY_NAME),
        type: z.enum(['string', 'number', 'integer', 'boolean', 'string-list', 'number-list']),
        description: z.string().max(BESPOKE_LIMITS.maxDescriptionChars),
        enumValues: z.array(z.string().max(200)).max(BESPOKE_LIMITS.maxEnumValues).nullable(),
        required: z.boolean(),
      }),
    )
    .min(1)
    .max(30),
});
export type DraftedFields = z.infer<typeof draftedFieldsSchema>;

export const DRAFT_JSON_SCHEMA: Record<string, unknown> = {
  type: 'object',
  properties: {
    fields: {
      type: 'array',
      minItems: 1,
      maxItems: 30,
      description: 'The fields to extract, one per piece of information the caller asked for.',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_]{0,39}$', description: 'camelCase field name: letters, digits and _ only, starting with a letter' },
          type: { type: 'string', enum: ['string', 'number', 'integer', 'boolean', 'string-list', 'number-list'] },
          description: { type: 'string', description: 'What the field holds, and its unit if it is a number' },
          enumValues: { type: ['array', 'null'], items: { type: 'string' }, description: 'Allowed values when the field is a closed set, else null' },
          required: { type: 'boolean', description: 'true when every photo should have a value' },
        },
        required: ['name', 'type', 'description', 'enumValues', 'required'],
        additionalProperties: false,
      },
    },
  },
  required: ['fields'],
  additionalProperties: false,
};

export function compileDraft(draft: DraftedFields): BespokeSchema {
  const properties: Record<string, BespokeNode> = {};
  for (const f of draft.fields) {
    if (Object.hasOwn(properties, f.name)) continue; // a duplicate name: first one wins
    const base: BespokeNode =
      f.type === 'string-list'
        ? { type: 'array', items: { type: 'string' } }
        : f.type === 'number-list'
          ? { type: 'array', items: { type: 'number' } }
          : { type: f.type, ...(f.enumValues?.length && f.type === 'string' ? { enum: f.enumValues } : {}) };
    properties[f.name] = { ...base, description: f.description };
  }
  return { type: 'object', properties, required: draft.fields.filter((f) => f.required && Object.hasOwn(properties, f.name)).map((f) => f.name) };
}
