import { accessibility } from './accessibility.ts';
import { atmosphere } from './atmosphere.ts';
import { authenticity } from './authenticity.ts';
import { automobile } from './automobile.ts';
import { colorPalette } from './color-palette.ts';
import { composition } from './composition.ts';
import { condition } from './condition.ts';
import { dating } from './dating.ts';
import { describe } from './describe.ts';
import { entities } from './entities.ts';
import { location } from './location.ts';
import { moderation } from './moderation.ts';
import { people } from './people.ts';
import { photoQuality } from './photo-quality.ts';
import { textContent } from './text-content.ts';
import { LENS_NAMES, type Lens, type LensName, type OutputOf } from './types.ts';
import { vehicleCondition } from './vehicle-condition.ts';

export type { Column, Lens, LensName } from './types.ts';
export { LENS_NAMES } from './types.ts';

const DEFINED = {
  dating,
  people,
  location,
  atmosphere,
  entities,
  accessibility,
  'photo-quality': photoQuality,
  'text-content': textContent,
  composition,
  moderation,
  describe,
  condition,
  authenticity,
  'color-palette': colorPalette,
  automobile,
  'vehicle-condition': vehicleCondition,
} as const satisfies Record<LensName, Lens>;
const BY_NAME: Readonly<Record<LensName, Lens>> = DEFINED;

/** The output type of lens `N`, from its module's zod schema: a renamed field is a type error wherever it is read. */
export type LensOutput<N extends LensName> = OutputOf<(typeof DEFINED)[N]>;

/** Every lens, in catalog order (the order of LENS_NAMES). */
export const LENSES: readonly Lens[] = LENS_NAMES.map((name) => BY_NAME[name]);

/** Lenses a caller may name in `modules` / `modulesAdd` (all but the internal ones). */
export const SELECTABLE_LENSES: readonly LensName[] = LENSES.filter((l) => !l.internal).map((l) => l.name);

export const isLensName = (s: unknown): s is LensName =>
  typeof s === 'string' && Object.prototype.hasOwnProperty.call(BY_NAME, s);

export function getLens(name: LensName): Lens {
  return BY_NAME[name];
}

/** Top-level `output` keys a lens owns, in schema order. */
export function outputFields(lens: Lens): string[] {
  return Object.keys(lens.output.shape);
}

/**
 * Catalog order, duplicates dropped. Everything derived from a lens set (vendor schema, prompt,
 * hashes, fixtures) uses it, so `[a, b]` and `[b, a]` produce the same bytes.
 */
export function canonicalOrder(lenses: readonly LensName[]): LensName[] {
  const wanted = new Set(lenses);
  return LENS_NAMES.filter((n) => wanted.has(n));
}
