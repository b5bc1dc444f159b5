/**
 * The operations of our own OpenAPI document, flattened for the fuzzer: method, path template,
 * parameters, the request body schema with every $ref resolved, and how the operation
 * authenticates.
 */

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  format?: string;
  anyOf?: JsonSchema[];
  $ref?: string;
  default?: unknown;
  [k: string]: unknown;
};

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: JsonSchema;
}

export type AuthKind = 'none' | 'bearer' | 'internal' | 'bearer-or-internal';

export interface Operation {
  /** "POST /v1/analyze" */
  id: string;
  method: string;
  /** Path template as in the document: /v1/internal/accounts/{userId} */
  path: string;
  params: Parameter[];
  body: JsonSchema | null;
  auth: AuthKind;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema?: JsonSchema }> }; security?: Array<Record<string, unknown>> }>>;
  components?: { schemas?: Record<string, JsonSchema> };
}

export function operationsOf(doc: OpenApiDocument): Operation[] {
  const schemas = doc.components?.schemas ?? {};
  const resolve = (s: JsonSchema, seen = new Set<string>()): JsonSchema => {
    if (s.$ref) {
      const name = s.$ref.replace('#/components/schemas/', '');
      if (seen.has(name)) return {};
      return resolve(schemas[name] ?? {}, new Set([...seen, name]));
    }
    const out: JsonSchema = { ...s };
    if (s.properties) out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, resolve(v, seen)]));
    if (s.items) out.items = resolve(s.items, seen);
    if (s.anyOf) out.anyOf = s.anyOf.map((v) => resolve(v, seen));
    if (typeof s.additionalProperties === 'object') out.additionalProperties = resolve(s.additionalProperties, seen);
    return out;
  };
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const schemes = new Set((op.security ?? []).flatMap((s) => Object.keys(s)));
      const auth: AuthKind = schemes.has('bearer') && schemes.has('internalSecret') ? 'bearer-or-internal' : schemes.has('bearer') ? 'bearer' : schemes.has('internalSecret') ? 'internal' : 'none';
      const body = op.requestBody?.content?.['application/json']?.schema;
      ops.push({
        id: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        // Shared parameters by reference (x-request-id) are left to the generator's own header cases.
        params: (op.parameters ?? []).filter((p) => !('$ref' in p)).map((p) => ({ ...p, schema: resolve(p.schema) })),
        body: body ? resolve(body) : null,
        auth,
      });
    }
  }
  return ops;
}
