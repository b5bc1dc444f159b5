import { describe, expect, it } from 'vitest';
import { buildCatalog } from '../../lenses/catalog.ts';
import { sandboxOutput, sandboxPerLens } from '../../lenses/fixtures.ts';
import { resolveLenses } from '../../lenses/resolve.ts';
import { validateOutput } from '../../lenses/schema.ts';

describe('sandbox fixtures', () => {
  it('gives every stack a sandbox output that validates against its resolved lenses and holds exactly their fields', () => {
    const catalog = buildCatalog();
    for (const preset of catalog.presets) {
      const { lenses } = resolveLenses({ preset: preset.name });
      const output = sandboxOutput(lenses);
      const expected = catalog.modules.filter((m) => lenses.includes(m.name as never)).flatMap((m) => m.outputFields);
      expect(Object.keys(output).sort(), preset.name).toEqual([...expected].sort());
      expect(validateOutput(lenses, output).ok, preset.name).toBe(true);
    }
  });

  it('returns the vehicle report for the vehicle-condition stack', () => {
    const output = sandboxOutput(resolveLenses({ preset: 'vehicle-condition' }).lenses) as Record<string, any>;
    expect(output.overallCondition.grade).toBe('good');
    expect(output.missingViews).toContain('engine-bay');
    expect(output.moderation.action).toBe('allow');
  });

  it('is the same payload on every call and a fresh copy each time', () => {
    const first = sandboxOutput(['moderation', 'describe']) as Record<string, any>;
    first.tags.push('mutated');
    first.caption = 'changed';
    const second = sandboxOutput(['describe', 'moderation']);
    expect(second).toEqual(sandboxOutput(['moderation', 'describe']));
    expect((second as Record<string, any>).tags).not.toContain('mutated');
    expect(sandboxPerLens(['describe']).describe?.caption).toBe((second as Record<string, any>).caption);
  });
});
