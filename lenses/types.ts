import type { z } from 'zod';

/** Column of a lens's default tabular projection (docs/contract.md "Resources"). */
export interface Column {
  label: string;
  /**
   * Dotted path into the analysis result, e.g. `output.estimatedDate.year`. A numeric segment
   * indexes an array (`output.dominantColors.0.hex`); a `*` segment maps over an array
   * (`output.landmarks.*.name` → list of names). Resolved by `resolveJsonPath` in columns.ts.
   */
  jsonPath: string;
  /** `percentage` columns hold a 0..1 fraction; exporters render it ×100. */
  format?: 'string' | 'number' | 'date' | 'percentage' | 'tags' | 'hex';
}

export const LENS_NAMES = [
  'dating',
  'people',
  'location',
  'atmosphere',
  'entities',
  'accessibility',
  'photo-quality',
  'text-content',
  'composition',
  'moderation',
  'describe',
  'condition',
  'authenticity',
  'color-palette',
  'automobile',
  'vehicle-condition',
] as const;
export type LensName = (typeof LENS_NAMES)[number];

/** Parts of the request `context` a lens can declare it reads (customInstructions reach every lens). */
export type ContextPart = 'knownPeople' | 'vehicle';

/**
 * A lens is data: one module per lens under lenses/. Everything else (catalog, OpenAPI, vendor
 * JSON schema, output validation, export columns, llms.txt, sandbox fixtures) is derived from it.
 */
export interface Lens<Shape extends z.ZodRawShape = z.ZodRawShape> {
  name: LensName;
  description: string;
  category: string;
  billable: boolean;
  /** Only reachable through a stack of the same name. */
  internal?: true;
  /**
   * Parts of the request's `context` this lens reads; only they reach its prompt (the caller's
   * known people and vehicle are tokens and a distraction to every other lens).
   */
  reads?: readonly ContextPart[];
  /** Version of the lens (prompt + schema); stored with each lens record. Bump on any change. */
  version: string;
  /**
   * Strict zod object whose top-level keys are exactly the lens's `outputFields`. Strict all the
   * way down (z.strictObject), so a vendor answer with stray keys fails validation.
   */
  output: z.ZodObject<Shape, z.core.$strict>;
  /** Instruction text for the vision model, specific to this lens. */
  prompt: string;
  defaultColumns: Column[];
  /** Deterministic sandbox output (svc_test_ keys); must validate against `output`. */
  fixture: z.infer<z.ZodObject<Shape, z.core.$strict>>;
}

/** Phantom key carrying a defined lens's output type (never set at runtime). */
declare const OUTPUT: unique symbol;

/** A lens as defineLens returns it: widened to Lens, with its own output type kept for LensOutput. */
export type DefinedLens<Output> = Lens & { readonly [OUTPUT]?: Output };

/** The output type a defined lens carries (LensOutput in index.ts). */
export type OutputOf<L> = L extends DefinedLens<infer O> ? O : never;

/**
 * Checks a lens literal against its own schema type (the fixture must fit the shape), then
 * widens it so lenses of different shapes sit in one registry array, keeping its output type.
 */
export function defineLens<Shape extends z.ZodRawShape>(lens: Lens<Shape>): DefinedLens<z.infer<z.ZodObject<Shape, z.core.$strict>>> {
  return lens as unknown as DefinedLens<z.infer<z.ZodObject<Shape, z.core.$strict>>>;
}
