import { LENS_NAMES, STACK_NAMES } from '@lenstack/client';
import leven from 'leven';
import { CliError, EXIT } from './exit-codes.ts';

/** The valid name nearest to `name` (edit distance), when it is near enough to be a typo. */
export function nearest(name: string, valid: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of valid) {
    const d = leven(name.toLowerCase(), candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  // A third of the name wrong is a typo; more is another word.
  return best !== null && bestDistance <= Math.max(2, Math.floor(name.length / 3)) ? best : null;
}

function refuse(kind: 'lens' | 'stack', name: string, valid: readonly string[]): never {
  const guess = nearest(name, valid);
  throw new CliError(`unknown ${kind} "${name}"${guess ? `; did you mean "${guess}"?` : ''} (lenstack catalog lists them)`, EXIT.USAGE);
}

/**
 * Lens and stack names checked before anything is sent (a usage error, exit 2, naming the nearest
 * valid one), from the API document the client is generated from; the API checks them again.
 */
export function checkNames(lenses: readonly string[], stack: string | undefined): void {
  for (const lens of lenses) if (!LENS_NAMES.includes(lens as never)) refuse('lens', lens, LENS_NAMES);
  if (stack !== undefined && !STACK_NAMES.includes(stack as never)) refuse('stack', stack, STACK_NAMES);
}
