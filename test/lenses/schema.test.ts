import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { resolveJsonPath } from '../../lenses/columns.ts';
import { sandboxOutput, sandboxPerLens } from '../../lenses/fixtures.ts';
import { LENSES, SELECTABLE_LENSES } from '../../lenses/index.ts';
import { jsonSchemaFor, lensJsonSchema, schemaHash, validateOutput, validateVehiclePhoto, vehiclePhotoJsonSchema } from '../../lenses/schema.ts';
import { LENS_NAMES, type LensName } from '../../lenses/types.ts';
import { vehiclePhoto } from '../../lenses/vehicle-photo.ts';

type Node = Record<string, unknown>;
const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Structural rules shared by OpenAI strict output, Anthropic tool schemas and Gemini responseJsonSchema. */
function ruleViolations(schema: unknown, path = '$'): string[] {
  if (Array.isArray(schema)) return schema.flatMap((s, i) => ruleViolations(s, `${path}[${i}]`));
  if (!isNode(schema)) return [];
  const out: string[] = [];
  for (const banned of ['$ref', '$defs', 'definitions', '$schema', 'oneOf', 'allOf', 'not', 'prefixItems', 'if', 'patternProperties']) {
    if (banned in schema) out.push(`${path}: ${banned}`);
  }
  if (schema.type === 'object' || 'properties' in schema) {
    const props = Object.keys(isNode(schema.properties) ? schema.properties : {});
    const required = Array.isArray(schema.required) ? schema.required : [];
    if (props.length === 0) out.push(`${path}: object without properties`);
    if ([...props].sort().join() !== [...required].sort().join()) out.push(`${path}: not every property required`);
    if (schema.additionalProperties !== false) out.push(`${path}: additionalProperties is not false`);
  }
  if (schema.type === 'array' && !isNode(schema.items)) out.push(`${path}: array without a single items schema`);
  if (Array.isArray(schema.anyOf)) {
    const branches = schema.anyOf as unknown[];
    const nulls = branches.filter((b) => isNode(b) && b.type === 'null');
    if (branches.length !== 2 || nulls.length !== 1) out.push(`${path}: anyOf other than X | null`);
  }
  if (Array.isArray(schema.type) && !(schema.type.length === 2 && schema.type.includes('null'))) out.push(`${path}: type union other than X | null`);
  if (schema.minimum === -Number.MAX_SAFE_INTEGER || schema.maximum === Number.MAX_SAFE_INTEGER) out.push(`${path}: safe-integer bound noise`);
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'properties' && isNode(v)) for (const [p, s] of Object.entries(v)) out.push(...ruleViolations(s, `${path}.${p}`));
    else if (k !== 'enum' && k !== 'required') out.push(...ruleViolations(v, `${path}/${k}`));
  }
  return out;
}

/** The zod side: strict objects all the way down, nullable instead of optional, no transforms. */
function zodViolations(schema: z.ZodType, path = '$'): string[] {
  const def = (schema as unknown as { _zod: { def: Node } })._zod.def;
  switch (def.type) {
    case 'object': {
      const catchall = def.catchall as { _zod: { def: Node } } | undefined;
      const own = catchall?._zod.def.type === 'never' ? [] : [`${path}: object is not strict`];
      const shape = def.shape as Record<string, z.ZodType>;
      return [...own, ...Object.entries(shape).flatMap(([k, s]) => zodViolations(s, `${path}.${k}`))];
    }
    case 'array':
      return zodViolations(def.element as z.ZodType, `${path}[]`);
    case 'nullable':
      return zodViolations(def.innerType as z.ZodType, path);
    case 'string':
    case 'number':
    case 'boolean':
    case 'enum':
      return [];
    default:
      return [`${path}: ${String(def.type)} is not allowed in a lens schema`];
  }
}

const PHOTO_LENSES = LENS_NAMES.filter((n) => n !== 'vehicle-condition');

describe('lens output schemas', () => {
  it.each(LENS_NAMES)('%s: zod schema is strict, required and nullable-only all the way down', (name) => {
    const lens = LENSES.find((l) => l.name === name)!;
    expect(zodViolations(lens.output)).toEqual([]);
  });

  it.each(LENS_NAMES)('%s: JSON schema passes the vendor structural rules', (name) => {
    expect(ruleViolations(lensJsonSchema(name))).toEqual([]);
  });

  it.each(LENS_NAMES)('%s: fixture validates and survives a JSON round trip unchanged', (name) => {
    const lens = LENSES.find((l) => l.name === name)!;
    const parsed = lens.output.parse(JSON.parse(JSON.stringify(lens.fixture)));
    expect(parsed).toEqual(lens.fixture);
  });

  it.each(LENS_NAMES)('%s: every default column resolves to a value in the sandbox output', (name) => {
    const lens = LENSES.find((l) => l.name === name)!;
    const result = { output: sandboxOutput([name]) };
    for (const column of lens.defaultColumns) {
      const value = resolveJsonPath(result, column.jsonPath);
      expect(value, `${name}: ${column.jsonPath}`).not.toBeUndefined();
      if (column.format === 'tags') expect(Array.isArray(value), `${column.jsonPath} is a list`).toBe(true);
      if (column.format === 'number' || column.format === 'percentage') expect(typeof value, column.jsonPath).toBe('number');
      if (column.format === 'percentage') expect(value as number).toBeLessThanOrEqual(1);
      if (column.format === 'hex') expect(value).toMatch(/^#[0-9a-f]{6}$/i);
      if (column.format === 'date') expect(value).toMatch(/^\d{4}(-\d{2}(-\d{2})?)?$/);
    }
  });

  it('combines lenses into one strict object with the union of their fields, in catalog order whatever the request order', () => {
    const schema = jsonSchemaFor(['describe', 'dating', 'moderation']);
    expect(schema.required).toEqual(['estimatedDate', 'dateAnchors', 'season', 'holiday', 'moderation', 'title', 'caption', 'description', 'tags']);
    expect(schema.additionalProperties).toBe(false);
    expect(jsonSchemaFor(['moderation', 'dating', 'describe'])).toEqual(schema);
    expect(schemaHash(['describe', 'dating', 'moderation'])).toBe(schemaHash(['moderation', 'describe', 'dating']));
    expect(schemaHash(['describe', 'moderation'])).toMatch(/^[0-9a-f]{64}$/);
    expect(schemaHash(['describe', 'moderation'])).not.toBe(schemaHash(['dating', 'moderation']));
  });

  it('keeps the largest combined schemas inside OpenAI strict-mode limits (properties, enum values, nesting)', () => {
    for (const schema of [jsonSchemaFor(PHOTO_LENSES), jsonSchemaFor(['moderation', 'vehicle-condition']), vehiclePhotoJsonSchema()]) {
      expect(ruleViolations(schema)).toEqual([]);
      const text = JSON.stringify(schema);
      expect((text.match(/"additionalProperties":false/g) ?? []).length).toBeLessThan(200);
      let enumValues = 0;
      let maxDepth = 0;
      const walk = (n: unknown, depth: number): void => {
        if (Array.isArray(n)) return n.forEach((x) => walk(x, depth));
        if (!isNode(n)) return;
        if (Array.isArray(n.enum)) enumValues += n.enum.length;
        if (isNode(n.properties)) maxDepth = Math.max(maxDepth, depth + 1);
        for (const [k, v] of Object.entries(n)) walk(v, k === 'properties' ? depth + 1 : depth);
      };
      walk(schema, 0);
      expect(enumValues).toBeLessThan(1000);
      expect(maxDepth).toBeLessThanOrEqual(5);
      expect(text.length).toBeLessThan(40_000);
    }
  });
});

describe('validateOutput', () => {
  it('splits a valid combined answer into per-lens outputs', () => {
    const lenses: LensName[] = ['moderation', 'dating', 'describe'];
    const result = validateOutput(lenses, sandboxOutput(lenses));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(Object.keys(result.perLens).sort()).toEqual(['dating', 'describe', 'moderation']);
    expect(Object.keys(result.perLens.dating)).toEqual(['estimatedDate', 'dateAnchors', 'season', 'holiday']);
    expect(result.perLens.describe).toEqual(sandboxPerLens(['describe']).describe);
  });

  it('rejects missing fields, stray top-level keys, stray nested keys and out-of-range numbers, naming lens and path', () => {
    const answer = sandboxOutput(['moderation', 'dating']) as Record<string, any>;
    delete answer.holiday;
    answer.bonus = 1;
    answer.season = { ...answer.season, extra: true };
    answer.estimatedDate = { ...answer.estimatedDate, confidence: 1.4 };
    const result = validateOutput(['moderation', 'dating'], answer);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^dating: output\.holiday: /),
        expect.stringMatching(/^dating: output\.season: .*extra/),
        expect.stringMatching(/^dating: output\.estimatedDate\.confidence: /),
        'output.bonus: not a field of the requested lenses',
      ]),
    );
  });

  it('rejects a non-object answer and fields of lenses that were not requested', () => {
    expect(validateOutput(['moderation'], [1, 2])).toEqual({ ok: false, errors: ['output: expected a JSON object'] });
    const extra = validateOutput(['moderation'], sandboxOutput(['moderation', 'describe']));
    expect(extra.ok).toBe(false);
  });

  it('accepts every selectable lens at once (the full-analysis answer plus moderation)', () => {
    expect(validateOutput(SELECTABLE_LENSES, sandboxOutput(SELECTABLE_LENSES)).ok).toBe(true);
  });
});

describe('vehicle per-photo step', () => {
  it('is not a catalog lens and its schema pairs moderation with the per-photo fields', () => {
    expect(LENS_NAMES as readonly string[]).not.toContain('vehicle-photo');
    const schema = vehiclePhotoJsonSchema();
    expect(schema.required).toEqual(['moderation', 'view', 'angle', 'vehicleVisible', 'visibleDamage', 'accidentSigns', 'quality', 'readings', 'identification', 'notes']);
    expect(ruleViolations(schema)).toEqual([]);
    expect(zodViolations(vehiclePhoto.output)).toEqual([]);
  });

  it('validates its fixture and splits moderation from the photo findings', () => {
    const ok = validateVehiclePhoto({ ...sandboxOutput(['moderation']), ...vehiclePhoto.fixture });
    expect(ok.ok).toBe(true);
    if (ok.ok) {
      expect(ok.photo.visibleDamage[0]?.component).toBe('front-bumper');
      expect(Object.keys(ok.moderation)).toEqual(['moderation']);
    }
    const bad = validateVehiclePhoto({ ...sandboxOutput(['moderation']), ...vehiclePhoto.fixture, view: 'sideways' });
    expect(bad.ok).toBe(false);
  });
});

describe('resolveJsonPath', () => {
  const doc = { output: { a: [{ b: 1, c: [{ d: 'x' }, { d: 'y' }] }, { b: 2, c: [] }], n: null } };
  it('follows keys, numeric indexes and * maps (flattening nested maps)', () => {
    expect(resolveJsonPath(doc, 'output.a.1.b')).toBe(2);
    expect(resolveJsonPath(doc, 'output.a.*.b')).toEqual([1, 2]);
    expect(resolveJsonPath(doc, 'output.a.*.c.*.d')).toEqual(['x', 'y']);
    expect(resolveJsonPath(doc, 'output.n')).toBeNull();
  });
  it('returns undefined for missing paths and an empty list for a * over nothing', () => {
    expect(resolveJsonPath(doc, 'output.a.5.b')).toBeUndefined();
    expect(resolveJsonPath(doc, 'output.n.x')).toBeUndefined();
    expect(resolveJsonPath(doc, 'output.missing.*.x')).toEqual([]);
    expect(resolveJsonPath(doc, 'output.a.length')).toBeUndefined();
  });
});
