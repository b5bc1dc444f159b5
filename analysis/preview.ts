import { validationFailed } from '../core/errors.ts';
import { planAnalysis } from '../credits/delta.ts';
import type { Db } from '../db/pool.ts';
import { resolveLenses } from '../lenses/resolve.ts';
import { cachedLensesIn } from '../registry/photos.ts';

export interface CostPreview {
  /** The stack the lenses came from; null when `modules` named them. */
  stack: string | null;
  /** Every lens the request would produce, moderation first (the resolution's order). */
  lenses: string[];
  /** Lenses that would run: not in the workspace's registry for this photo. */
  new: string[];
  /** Lenses the registry holds for this photo already: answered from it, not billed again. */
  inRegistry: string[];
  /** The subset of `new` that costs a credit. */
  billed: string[];
  /** Credits the analysis would reserve and, if everything is delivered, charge. */
  credits: number;
  warnings: string[];
}

/**
 * What an analysis of one photo (known by its SHA-256 only: the bytes are not needed) would run and
 * cost for `accountId`, from the same code the analyze path bills with: the lens resolution
 * (lenses/resolve.ts), the registry's cached lenses (registry/photos.ts `cachedLensesIn`, which the
 * reservation reads too) and the delta plan (credits/delta.ts). Reads only: nothing is reserved,
 * stored or charged. The vehicle-condition stack (a flat price over several photos) is not previewed.
 */
export async function previewAnalysis(db: Db, accountId: string, req: { sha256: string; preset?: string; modules?: string[] }): Promise<CostPreview> {
  const resolved = resolveLenses({ ...(req.preset !== undefined ? { preset: req.preset } : {}), ...(req.modules !== undefined ? { modules: req.modules } : {}) });
  if (resolved.outputSchema !== 'photo') throw validationFailed('preset: the vehicle-condition stack is not previewed (it takes several photos of one vehicle)');
  const cached = await cachedLensesIn(db, { accountId, sha256s: [req.sha256], lenses: resolved.lenses });
  const plan = planAnalysis({ sha256s: [req.sha256], lenses: resolved.lenses, billable: resolved.billable, cached, extraCredits: 0 });
  const image = plan.plans[0]!;
  return {
    stack: resolved.stack,
    lenses: resolved.lenses,
    new: image.ran,
    inRegistry: resolved.lenses.filter((l) => !image.ran.includes(l)),
    billed: image.billed,
    credits: plan.needed,
    warnings: resolved.warnings,
  };
}
