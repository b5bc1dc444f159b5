import { z } from 'zod';
import { VENDOR_NAMES, type VendorName } from '../../core/vendor-names.ts';

/** How a simulated vendor fails when it fails. */
export const FAILURE_MODES = ['http500', 'http429', 'http400', 'invalid-json', 'schema-invalid', 'stall'] as const;
export type FailureMode = (typeof FAILURE_MODES)[number];

export const behaviourSchema = z.strictObject({
  /** Delay before every answer (success or failure), in ms. */
  latencyMs: z.number().int().min(0).max(600_000),
  /** Fraction of calls that fail, drawn from a seeded PRNG (0 = never, 1 = always). */
  failRate: z.number().min(0).max(1),
  /** What a failing call does. */
  failure: z.enum(FAILURE_MODES),
});
export type Behaviour = z.infer<typeof behaviourSchema>;

export const DEFAULT_BEHAVIOUR: Behaviour = { latencyMs: 0, failRate: 0, failure: 'http500' };

export const behaviourPatchSchema = behaviourSchema.partial();
export type BehaviourPatch = z.infer<typeof behaviourPatchSchema>;

/** Body of `POST /__sim/config`: a patch for all vendors and/or per vendor (vendor wins). */
export const configPatchSchema = z.strictObject({
  all: behaviourPatchSchema.optional(),
  ...(Object.fromEntries(VENDOR_NAMES.map((v) => [v, behaviourPatchSchema.optional()])) as { [V in VendorName]: z.ZodOptional<typeof behaviourPatchSchema> }),
});
export type ConfigPatch = z.infer<typeof configPatchSchema>;
