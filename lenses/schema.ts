import { createHash } from 'node:crypto';
import { z } from 'zod';
import { canonicalOrder, getLens, LENSES, outputFields } from './index.ts';
import { moderation } from './moderation.ts';
import type { LensName } from './types.ts';
import { vehiclePhotoOutput, type VehiclePhotoOutput } from './vehicle-photo.ts';

/**
 * Vendor-facing JSON Schema for lens outputs: plain draft 2020-12, object root, every property
 * required, additionalProperties false on every object, nullables as `type: [.., 'null']` or
 * `anyOf [.., {type: 'null'}]`, no $ref, no $schema. vendors/ rewrites it into each vendor's
 * dialect; this module guarantees the common ground and refuses a lens that breaks it.
 */
export type JsonSchema = Record<string, unknown>;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const isObject = (v: unknown): v is JsonSchema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Drops generator noise and checks the structural rules; throws (a programming error) if broken. */
function tidy(node: unknown, path: string): unknown {
  if (Array.isArray(node)) return node.map((v, i) => tidy(v, `${path}[${i}]`));
  if (!isObject(node)) return node;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$schema') continue;
    // z.int() emits the safe-integer range; it says nothing and some vendors choke on huge bounds.
    if (key === 'minimum' && value === -MAX_SAFE) continue;
    if (key === 'maximum' && value === MAX_SAFE) continue;
    if (key === '$ref' || key === '$defs' || key === 'definitions') throw new Error(`lens schema ${path}: $ref/$defs not allowed`);
    if (key === 'oneOf' || key === 'allOf' || key === 'not' || key === 'prefixItems') {
      throw new Error(`lens schema ${path}: ${key} not allowed`);
    }
    out[key] = key === 'properties' && isObject(value)
      ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, tidy(v, `${path}.${k}`)]))
      : tidy(value, `${path}/${key}`);
  }
  if (out.type === 'object' || isObject(out.properties)) {
    const props = Object.keys(isObject(out.properties) ? out.properties : {});
    const required = Array.isArray(out.required) ? out.required : [];
    if (props.length !== required.length || props.some((p) => !required.includes(p))) {
      throw new Error(`lens schema ${path}: every property must be required (use .nullable(), not .optional())`);
    }
    if (out.additionalProperties !== false) throw new Error(`lens schema ${path}: objects must be strict`);
  }
  return out;
}

/** One zod object → vendor-ready JSON Schema. */
export function toVendorJsonSchema(schema: z.ZodType, name = 'schema'): JsonSchema {
  const raw = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output', reused: 'inline', cycles: 'throw', unrepresentable: 'throw' });
  return tidy(raw, name) as JsonSchema;
}

const perLensSchema = new Map<LensName, JsonSchema>(LENSES.map((l) => [l.name, toVendorJsonSchema(l.output, l.name)]));

/** JSON Schema of one lens's output. */
export function lensJsonSchema(name: LensName): JsonSchema {
  const schema = perLensSchema.get(name);
  if (!schema) throw new Error(`unreachable: lens ${name}`);
  return schema;
}

function combine(parts: readonly JsonSchema[]): JsonSchema {
  const properties: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part.properties as Record<string, unknown>)) {
      if (key in properties) throw new Error(`output key ${key} is owned by two lenses`);
      properties[key] = value;
    }
  }
  return { type: 'object', properties, required: Object.keys(properties), additionalProperties: false };
}

/**
 * One object schema holding every output field of the given lenses, in catalog order (so the
 * request's lens order never changes the bytes sent to a vendor).
 */
export function jsonSchemaFor(lenses: readonly LensName[]): JsonSchema {
  return combine(canonicalOrder(lenses).map(lensJsonSchema));
}

/** Stable identity of the combined schema: sha256 hex of its JSON. */
export function schemaHash(lenses: readonly LensName[]): string {
  return createHash('sha256').update(JSON.stringify(jsonSchemaFor(lenses))).digest('hex');
}

const formatIssues = (prefix: string, error: z.ZodError): string[] =>
  error.issues.map((i) => `${prefix}${i.path.length > 0 ? `.${i.path.join('.')}` : ''}: ${i.message}`);

/**
 * Checks a vendor's combined answer against each lens's strict zod schema and splits it per lens.
 * Keys no requested lens owns are errors, as are missing ones.
 */
export function validateOutput(
  lenses: readonly LensName[],
  json: unknown,
): { ok: true; perLens: Record<LensName, Record<string, unknown>> } | { ok: false; errors: string[] } {
  if (!isObject(json)) return { ok: false, errors: ['output: expected a JSON object'] };
  const ordered = canonicalOrder(lenses);
  const errors: string[] = [];
  const perLens = {} as Record<LensName, Record<string, unknown>>;
  const owned = new Set<string>();
  for (const name of ordered) {
    const lens = getLens(name);
    const fields = outputFields(lens);
    fields.forEach((f) => owned.add(f));
    const slice = Object.fromEntries(fields.filter((f) => f in json).map((f) => [f, json[f]]));
    const parsed = lens.output.safeParse(slice);
    if (parsed.success) perLens[name] = parsed.data as Record<string, unknown>;
    else errors.push(...formatIssues(`${name}: output`, parsed.error));
  }
  for (const key of Object.keys(json)) {
    if (!owned.has(key)) errors.push(`output.${key}: not a field of the requested lenses`);
  }
  return errors.length === 0 ? { ok: true, perLens } : { ok: false, errors };
}

/**
 * The vehicle stack's per-photo fan-out answers moderation (which runs on every photo) and the
 * vehicle-photo fields in one call.
 */
export function vehiclePhotoJsonSchema(): JsonSchema {
  return combine([lensJsonSchema('moderation'), toVendorJsonSchema(vehiclePhotoOutput, 'vehicle-photo')]);
}

const vehiclePhotoCall = moderation.output.extend(vehiclePhotoOutput.shape).strict();

export function validateVehiclePhoto(
  json: unknown,
): { ok: true; moderation: Record<string, unknown>; photo: VehiclePhotoOutput } | { ok: false; errors: string[] } {
  const parsed = vehiclePhotoCall.safeParse(json);
  if (!parsed.success) return { ok: false, errors: formatIssues('vehicle-photo: output', parsed.error) };
  const { moderation: mod, ...photo } = parsed.data;
  return { ok: true, moderation: { moderation: mod }, photo: photo as VehiclePhotoOutput };
}
