import { describe, expect, it } from 'vitest';
import { buildCatalog, catalogResponseSchema } from '../../lenses/catalog.ts';
import { canonicalOrder, getLens, isLensName, LENSES, outputFields, SELECTABLE_LENSES } from '../../lenses/index.ts';
import { STACKS } from '../../lenses/stacks.ts';
import { LENS_NAMES } from '../../lenses/types.ts';

const catalog = buildCatalog();
const entry = (name: string) => catalog.modules.find((m) => m.name === name);

describe('lens catalog (GET /v1/modules)', () => {
  it('lists all 16 lenses of docs/contract.md, in catalog order, and validates against its own response schema', () => {
    expect(catalog.modules.map((m) => m.name)).toEqual([...LENS_NAMES]);
    expect(catalog.modules).toHaveLength(16);
    expect(catalogResponseSchema.parse(catalog)).toEqual(catalog);
  });

  it('makes 15 lenses selectable: every lens except vehicle-condition', () => {
    expect(SELECTABLE_LENSES).toHaveLength(15);
    expect(SELECTABLE_LENSES).not.toContain('vehicle-condition');
    expect(SELECTABLE_LENSES).toContain('moderation');
  });

  it('carries internal: true only on vehicle-condition and omits the key everywhere else', () => {
    expect(catalog.modules.filter((m) => 'internal' in m).map((m) => m.name)).toEqual(['vehicle-condition']);
    expect(entry('vehicle-condition')?.internal).toBe(true);
  });

  it('marks exactly moderation and vehicle-condition as not billable', () => {
    expect(catalog.modules.filter((m) => !m.billable).map((m) => m.name)).toEqual(['moderation', 'vehicle-condition']);
  });

  it('reports the outputFields of docs/contract.md for dating, moderation and vehicle-condition', () => {
    expect(entry('dating')?.outputFields).toEqual(['estimatedDate', 'dateAnchors', 'season', 'holiday']);
    expect(entry('moderation')?.outputFields).toEqual(['moderation']);
    expect(entry('vehicle-condition')?.outputFields).toEqual([
      'photos',
      'overallCondition',
      'observations',
      'componentGrades',
      'accidentIndicators',
      'photoQuality',
      'missingViews',
      'vehicleContext',
    ]);
  });

  it('derives outputFields from the zod keys and never lets two lenses own the same output key', () => {
    const owners = new Map<string, string>();
    for (const lens of LENSES) {
      expect(entry(lens.name)?.outputFields).toEqual(Object.keys(lens.output.shape));
      for (const field of outputFields(lens)) {
        expect(owners.get(field), `${field} owned by ${owners.get(field)} and ${lens.name}`).toBeUndefined();
        owners.set(field, lens.name);
      }
    }
    expect(owners.size).toBeGreaterThan(50);
  });

  it('gives every lens a description, category, semver version, prompt and valid default columns', () => {
    for (const lens of LENSES) {
      expect(lens.description.length, lens.name).toBeGreaterThan(40);
      expect(lens.category, lens.name).toMatch(/^[a-z]+$/);
      expect(lens.version, lens.name).toMatch(/^\d+\.\d+\.\d+$/);
      expect(lens.prompt.length, lens.name).toBeGreaterThan(150);
      expect(lens.defaultColumns.length, lens.name).toBeGreaterThan(0);
      for (const c of lens.defaultColumns) expect(c.jsonPath, `${lens.name} ${c.label}`).toMatch(/^output\.[A-Za-z]/);
    }
    expect(entry('dating')?.category).toBe('temporal');
    expect(entry('moderation')?.category).toBe('safety');
  });

  it('lists the 8 stacks with the lists of docs/contract.md for full-analysis, quick-scan and vehicle-condition', () => {
    const presets = Object.fromEntries(catalog.presets.map((p) => [p.name, p.modules]));
    expect(Object.keys(presets)).toEqual(['full-analysis', 'quick-scan', 'automobile', 'claims', 'property', 'ecommerce', 'memorial', 'vehicle-condition']);
    expect(presets['full-analysis']).toEqual([
      'dating', 'people', 'location', 'atmosphere', 'photo-quality', 'entities', 'composition',
      'text-content', 'accessibility', 'describe', 'condition', 'authenticity', 'color-palette', 'automobile',
    ]);
    expect(presets['quick-scan']).toEqual(['moderation']);
    expect(presets['vehicle-condition']).toEqual(['multi-image', 'multi-image-vehicle', 'vehicle-condition']);
  });

  it('builds the five undocumented stacks only from selectable, non-moderation lenses, each with a stated reason', () => {
    for (const name of ['automobile', 'claims', 'property', 'ecommerce', 'memorial']) {
      const stack = STACKS.find((s) => s.name === name);
      expect(stack, name).toBeDefined();
      const lenses = [...(stack?.lenses ?? [])];
      expect(lenses.length, name).toBeGreaterThanOrEqual(4);
      expect(new Set(lenses).size, name).toBe(lenses.length);
      for (const lens of lenses) {
        expect(isLensName(lens) && SELECTABLE_LENSES.includes(lens) && lens !== 'moderation', `${name}: ${lens}`).toBe(true);
        expect(stack?.rationale[lens as keyof typeof stack.rationale], `${name}: why ${lens}`).toBeTruthy();
      }
    }
    expect(STACKS.find((s) => s.name === 'automobile')?.lenses).toContain('automobile');
    expect(STACKS.find((s) => s.name === 'memorial')?.lenses).toEqual(expect.arrayContaining(['dating', 'people']));
  });

  it('orders any lens set canonically and drops duplicates', () => {
    expect(canonicalOrder(['describe', 'dating', 'describe', 'moderation'])).toEqual(['dating', 'moderation', 'describe']);
    expect(getLens('color-palette').name).toBe('color-palette');
    expect(isLensName('multi-image')).toBe(false);
    expect(isLensName('toString')).toBe(false);
  });
});
