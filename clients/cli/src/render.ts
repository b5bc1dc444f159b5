import type { Catalog } from '@lenstack/client';

type Column = Catalog['modules'][number]['defaultColumns'][number];

/**
 * Reads a catalog column's jsonPath (`output.estimatedDate.year`, `output.colors.*.hex`,
 * `output.objects.0.name`) from an analysis-shaped value: `*` maps over an array, a number picks.
 */
export function readPath(value: unknown, path: string): unknown {
  let current: unknown[] = [value];
  let mapped = false;
  for (const part of path.split('.')) {
    if (part === '*') {
      current = current.flatMap((v) => (Array.isArray(v) ? v : []));
      mapped = true;
      continue;
    }
    current = current.map((v) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined));
  }
  return mapped ? current.filter((v) => v !== undefined && v !== null) : current[0];
}

/** A cell as a person reads it: percentages as %, tags joined, objects compact, absent as empty. */
export function formatCell(value: unknown, format: Column['format']): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) return value.map((v) => formatCell(v, format === 'tags' ? 'string' : format)).filter(Boolean).join(', ');
  if (format === 'percentage' && typeof value === 'number') return `${Math.round(value * 100)}%`;
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** Rows of `label  value`, aligned; long values cut to the terminal's width. */
export function table(rows: Array<[string, string]>, indent = '', width = 100): string {
  const labelWidth = Math.max(0, ...rows.map(([l]) => l.length));
  return rows
    .map(([label, value]) => {
      const room = Math.max(20, width - indent.length - labelWidth - 2);
      const text = value.length > room ? `${value.slice(0, room - 1)}…` : value;
      return `${indent}${label.padEnd(labelWidth)}  ${text}`;
    })
    .join('\n');
}

/**
 * The readable view of one photo's output: for each lens that ran, its catalog default columns
 * with values; lenses without default columns show their top-level fields.
 */
export function lensRows(catalog: Catalog, lenses: string[], subject: unknown, width: number): string {
  const blocks: string[] = [];
  for (const name of lenses) {
    const lens = catalog.modules.find((m) => m.name === name);
    if (!lens) continue;
    const rows: Array<[string, string]> = lens.defaultColumns.length
      ? lens.defaultColumns.map((c) => [c.label, formatCell(readPath(subject, c.jsonPath), c.format)])
      : lens.outputFields.map((f) => [f, formatCell(readPath(subject, `output.${f}`), undefined)]);
    const shown = rows.filter(([, v]) => v !== '');
    if (shown.length) blocks.push(`  ${name}\n${table(shown, '    ', width)}`);
  }
  return blocks.join('\n');
}
