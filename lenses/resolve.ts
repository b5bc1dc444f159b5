import { validationFailed } from '../core/errors.ts';
import { getLens, isLensName, LENS_NAMES } from './index.ts';
import { DEFAULT_STACK, getStack, isStackName, PIPELINE_STEPS, STACK_NAMES, type StackName } from './stacks.ts';
import type { LensName } from './types.ts';
import { MAX_LENS_OPTIONS_CHARS } from './prompt.ts';

/** Deepest nesting a lens's options may have (what a prompt can use is a few levels at most). */
export const MAX_LENS_OPTIONS_DEPTH = 32;

export interface ResolveRequest {
  preset?: string;
  modules?: readonly string[];
  modulesAdd?: readonly string[];
  modulesRemove?: readonly string[];
  /** Keys must be lens names; each value is bounded (depth, size) here, its meaning is the prompt's business. */
  moduleOptions?: Record<string, unknown>;
}

export interface Resolution {
  /** The stack the lenses came from; null when `modules` overrode it. */
  stack: StackName | null;
  /** Lenses to produce, moderation first, then the request's order, no duplicates. */
  lenses: LensName[];
  /** The subset of `lenses` that costs a credit per image. */
  billable: LensName[];
  outputSchema: 'photo' | 'vehicle';
  warnings: string[];
}

const MODERATION: LensName = 'moderation';
const VEHICLE_STACK: StackName = 'vehicle-condition';

const quote = (v: unknown) => JSON.stringify(v);

/** Every entry must be a lens a caller may name; returns them typed, in order, with duplicates. */
function checkNames(field: 'modules' | 'modulesAdd' | 'modulesRemove', names: readonly string[]): LensName[] {
  return names.map((name) => {
    if (!isLensName(name)) {
      const hint = (PIPELINE_STEPS as readonly string[]).includes(name)
        ? ` (a step of the ${quote(VEHICLE_STACK)} stack, not a lens; use preset ${quote(VEHICLE_STACK)})`
        : `; known lenses: ${LENS_NAMES.filter((n) => !getLens(n).internal).join(', ')}`;
      throw validationFailed(`${field}: unknown lens ${quote(name)}${hint}`);
    }
    if (field !== 'modulesRemove' && getLens(name).internal) {
      throw validationFailed(
        `${field}: lens ${quote(name)} is internal and only reachable through preset ${quote(name)}`,
      );
    }
    return name;
  });
}

/**
 * Turns the request's preset/modules/modulesAdd/modulesRemove into the lenses to run (docs/contract.md,
 * analyze rule 2). Pure; throws VALIDATION_FAILED naming the field and value. Decisions: docs/decisions.md.
 */
export function resolveLenses(req: ResolveRequest): Resolution {
  const warnings: string[] = [];
  if (req.preset !== undefined && !isStackName(req.preset)) {
    throw validationFailed(`preset: unknown stack ${quote(req.preset)}; known stacks: ${STACK_NAMES.join(', ')}`);
  }
  const modules = req.modules === undefined ? undefined : checkNames('modules', req.modules);
  const add = checkNames('modulesAdd', req.modulesAdd ?? []);
  const remove = checkNames('modulesRemove', req.modulesRemove ?? []);
  const both = add.find((n) => remove.includes(n));
  if (both !== undefined) throw validationFailed(`modulesAdd/modulesRemove: lens ${quote(both)} is in both lists`);

  let stack: StackName | null;
  let base: LensName[];
  if (modules !== undefined) {
    stack = null;
    base = modules;
    if (req.preset !== undefined) warnings.push(`preset ${quote(req.preset)} ignored: modules overrides preset`);
  } else {
    stack = (req.preset as StackName | undefined) ?? DEFAULT_STACK;
    if (req.preset === undefined) warnings.push(`no preset or modules given: using stack ${quote(DEFAULT_STACK)}`);
    if (stack === VEHICLE_STACK) {
      // The vehicle report is one fixed pipeline with its own output schema; mixing photo lenses
      // into it would produce neither a vehicle report nor per-photo results.
      if (add.length > 0 || remove.length > 0) {
        throw validationFailed(
          `${add.length > 0 ? 'modulesAdd' : 'modulesRemove'}: the ${quote(VEHICLE_STACK)} stack cannot be adjusted; send modules for photo lenses instead`,
        );
      }
      checkLensOptions(req.moduleOptions, [MODERATION, 'vehicle-condition'], warnings);
      return { stack, lenses: [MODERATION, 'vehicle-condition'], billable: [], outputSchema: 'vehicle', warnings };
    }
    base = getStack(stack).lenses.filter(isLensName);
  }

  const wanted = new Set<LensName>([...base, ...add]);
  for (const name of new Set(remove)) {
    if (name === MODERATION) {
      warnings.push(`modulesRemove: ${quote(MODERATION)} always runs (free of charge) and was kept`);
    } else if (!wanted.delete(name)) {
      warnings.push(`modulesRemove: lens ${quote(name)} was not requested`);
    }
  }
  wanted.delete(MODERATION);
  const lenses: LensName[] = [MODERATION, ...wanted];
  checkLensOptions(req.moduleOptions, lenses, warnings);
  return {
    stack,
    lenses,
    billable: lenses.filter((n) => getLens(n).billable),
    outputSchema: 'photo',
    warnings,
  };
}

function checkLensOptions(options: Record<string, unknown> | undefined, lenses: readonly LensName[], warnings: string[]): void {
  for (const key of Object.keys(options ?? {})) {
    if (!isLensName(key)) throw validationFailed(`moduleOptions: unknown lens ${quote(key)}`);
    // The options travel in the workflow input (a Temporal payload, serialized with JSON.stringify):
    // one nested 10,000 deep overflowed the stack, one of megabytes went over the payload limit,
    // both a 500 after the image was taken in. Bounded here, before anything runs, ignored or not.
    const value = options![key];
    if (depthOf(value) > MAX_LENS_OPTIONS_DEPTH) throw validationFailed(`moduleOptions.${key}: nested deeper than ${MAX_LENS_OPTIONS_DEPTH} levels`);
    if ((JSON.stringify(value) ?? '').length > MAX_LENS_OPTIONS_CHARS) throw validationFailed(`moduleOptions.${key}: larger than ${MAX_LENS_OPTIONS_CHARS} characters`);
    if (!lenses.includes(key)) warnings.push(`moduleOptions.${key} ignored: lens not requested`);
  }
}

/** Nesting depth of a JSON value (a scalar is 0), iteratively: it may nest 100,000 deep. Stops past the limit. */
function depthOf(root: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[root, 0]];
  while (stack.length) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > MAX_LENS_OPTIONS_DEPTH) return deepest;
    for (const child of Array.isArray(value) ? value : Object.values(value)) stack.push([child, depth + 1]);
  }
  return deepest;
}
