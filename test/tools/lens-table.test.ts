import { describe, expect, it } from 'vitest';
import { LENSES, outputFields } from '../../lenses/index.ts';
import { STACKS } from '../../lenses/stacks.ts';
import { committedLensTable, lensTable } from '../../tools/scripts/lens-table.ts';

describe('docs/lenses.md', () => {
  it('is what the lens modules and stacks.ts generate (run `npm run docs:lenses` after changing a lens)', async () => {
    expect(await committedLensTable()).toBe(lensTable());
  });

  it('has one row per lens with its output fields, and one per stack', () => {
    const table = lensTable();
    for (const lens of LENSES) expect(table).toContain(`| \`${lens.name}\` |`);
    for (const lens of LENSES) expect(table).toContain(outputFields(lens).join(', '));
    for (const stack of STACKS) expect(table).toContain(`| \`${stack.name}\` | ${stack.lenses.join(', ')} |`);
  });
});
