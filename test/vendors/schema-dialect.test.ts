import { describe, expect, it } from 'vitest';
import { CONSTRAINT_HINT_MARKER, readConstraintHint, safeSchemaName } from '../../vendors/schema-dialect.ts';
import { lensLikeSchema } from './fixtures.ts';
import { VENDOR_REGISTRY } from '../../vendors/registry.ts';

const toOpenAISchema = VENDOR_REGISTRY.openai.toSchema;
const toGeminiSchema = VENDOR_REGISTRY.google.toSchema;
const toAnthropicSchema = VENDOR_REGISTRY.anthropic.toSchema;

const keysEverywhere = (schema: unknown): Set<string> => {
  const keys = new Set<string>();
  const visit = (node: unknown, inProperties: boolean) => {
    if (Array.isArray(node)) return node.forEach((n) => visit(n, false));
    if (typeof node !== 'object' || node === null) return;
    for (const [k, v] of Object.entries(node)) {
      if (!inProperties) keys.add(k);
      if (k === 'enum' || k === 'const' || k === 'required' || k === 'propertyOrdering') continue;
      visit(v, k === 'properties' && !inProperties);
    }
  };
  visit(schema, false);
  return keys;
};

describe('toOpenAISchema (strict structured outputs)', () => {
  const out = toOpenAISchema(lensLikeSchema());

  it('keeps the meaning OpenAI enforces: closed objects, required lists, enums, pattern, bounds, item counts', () => {
    const props = out.properties as Record<string, Record<string, unknown>>;
    expect(out.additionalProperties).toBe(false);
    expect(out.required).toEqual(Object.keys(props));
    expect((props.palette!.items as Record<string, any>).properties.hex.pattern).toBe('^#[0-9a-fA-F]{6}$');
    expect(props.palette).toMatchObject({ minItems: 1, maxItems: 5 });
    expect(props.year!.anyOf).toEqual([{ type: 'integer', minimum: 1820, maximum: 2100 }, { type: 'null' }]);
  });

  it('drops $schema and moves unsupported keywords (string lengths) into a description hint', () => {
    const keys = keysEverywhere(out);
    expect(keys.has('$schema')).toBe(false);
    expect(keys.has('minLength')).toBe(false);
    expect(keys.has('maxLength')).toBe(false);
    const summary = (out.properties as Record<string, Record<string, unknown>>).summary!;
    expect(summary.description).toBe(`${CONSTRAINT_HINT_MARKER}{"minLength":10,"maxLength":200}`);
    expect(readConstraintHint(summary.description)).toEqual({ minLength: 10, maxLength: 200 });
  });

  it('keeps supported formats and hints the others', () => {
    const s = toOpenAISchema({ type: 'object', properties: { d: { type: 'string', format: 'date' }, u: { type: 'string', format: 'uri' } } });
    const props = s.properties as Record<string, Record<string, unknown>>;
    expect(props.d!.format).toBe('date');
    expect(props.u!.format).toBeUndefined();
    expect(readConstraintHint(props.u!.description)).toEqual({ format: 'uri' });
  });

  it('rewrites oneOf as anyOf', () => {
    const s = toOpenAISchema({ oneOf: [{ type: 'string' }, { type: 'null' }] });
    expect(s).toEqual({ anyOf: [{ type: 'string' }, { type: 'null' }] });
  });
});

describe('toGeminiSchema (responseJsonSchema subset)', () => {
  const out = toGeminiSchema(lensLikeSchema());

  it('uses only keywords in Google\'s documented subset', () => {
    const allowed = new Set([
      '$id', '$defs', '$ref', '$anchor', 'type', 'format', 'title', 'description', 'enum', 'items', 'prefixItems',
      'minItems', 'maxItems', 'minimum', 'maximum', 'anyOf', 'properties', 'additionalProperties', 'required', 'propertyOrdering',
    ]);
    expect([...keysEverywhere(out)].filter((k) => !allowed.has(k))).toEqual([]);
  });

  it('turns const into a one-value enum, keeps nullables, and orders properties as declared', () => {
    const props = out.properties as Record<string, Record<string, unknown>>;
    expect(props.version).toEqual({ type: 'string', enum: ['v1'] });
    expect(props.takenOn!.anyOf).toBeDefined();
    expect(out.propertyOrdering).toEqual(Object.keys(props));
  });

  it('keeps the pattern as a hint the model (and the sim) can read', () => {
    const hex = ((out.properties as any).palette.items.properties.hex) as Record<string, unknown>;
    expect(hex.pattern).toBeUndefined();
    expect(readConstraintHint(hex.description)).toEqual({ pattern: '^#[0-9a-fA-F]{6}$' });
  });

  it('appends the hint after an existing description', () => {
    const s = toGeminiSchema({ type: 'string', description: 'Colour.', pattern: '^#' });
    expect(s.description).toBe(`Colour. ${CONSTRAINT_HINT_MARKER}{"pattern":"^#"}`);
  });
});

describe('toAnthropicSchema', () => {
  it('passes JSON Schema through, without $schema', () => {
    const input = lensLikeSchema();
    const { $schema: _dropped, ...rest } = input;
    expect(toAnthropicSchema(input)).toEqual(rest);
  });
});

describe('safeSchemaName', () => {
  it('fits the vendors\' name rule', () => {
    expect(safeSchemaName('lenstack_analysis')).toBe('lenstack_analysis');
    expect(safeSchemaName('vehicle photo #1')).toBe('vehicle_photo__1');
    expect(safeSchemaName('x'.repeat(80))).toHaveLength(64);
    expect(safeSchemaName('')).toBe('output');
  });
});
