import { getLens } from './index.ts';
import type { Column, LensName } from './types.ts';

/**
 * Resolves a Column.jsonPath against an analysis result: dotted keys, a numeric segment indexes an
 * array, `*` maps over an array (nested `*` results are flattened). Missing → undefined.
 */
export function resolveJsonPath(root: unknown, path: string): unknown {
  let current: unknown[] = [root];
  let mapped = false;
  for (const segment of path.split('.')) {
    const next: unknown[] = [];
    for (const value of current) {
      if (segment === '*') {
        if (Array.isArray(value)) next.push(...value);
      } else if (Array.isArray(value) && /^\d+$/.test(segment)) {
        if (Number(segment) < value.length) next.push(value[Number(segment)]);
      } else if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.prototype.hasOwnProperty.call(value, segment)) {
        next.push((value as Record<string, unknown>)[segment]);
      }
    }
    if (segment === '*') mapped = true;
    current = next;
  }
  return mapped ? current : current[0];
}

/** The default columns of a lens set, in the given order (export fallback for old batches). */
export function defaultColumnsFor(lenses: readonly LensName[]): Column[] {
  return lenses.flatMap((n) => getLens(n).defaultColumns);
}
