/**
 * The billing delta of one request, planned once by the step that reserves its credits. Pure and
 * free of Node imports: the reserving activity computes it and the workflow carries the answer.
 */

import { LENS_CREDITS } from './price-book.ts';

/** What one image of an analysis runs and bills. */
export interface ImagePlan {
  /** Lenses this request runs on the image (none for a repeat of a photo earlier in the request). */
  ran: string[];
  /** The subset of `ran` that costs a credit. */
  billed: string[];
  /** Whether this is the first copy of its photo in the request (a later copy rides along). */
  first: boolean;
  /** Index of the first copy of this photo in the request (this image's own index when `first`). */
  source: number;
}

export interface AnalysisPlan {
  plans: ImagePlan[];
  /** Credits to reserve: one per billed lens, plus the request's flat extras (an extraction). */
  needed: number;
}

/** Index of the first copy of each image's photo: the same photo twice is analyzed and billed once. */
export function firstCopies(sha256s: readonly string[]): number[] {
  const first = new Map<string, number>();
  return sha256s.map((sha, i) => {
    if (!first.has(sha)) first.set(sha, i);
    return first.get(sha)!;
  });
}

export function planAnalysis(args: {
  sha256s: readonly string[];
  lenses: readonly string[];
  billable: readonly string[];
  /** Per photo, the requested lenses the caller's projection already holds. */
  cached: Readonly<Record<string, readonly string[]>>;
  /** Credits billed on top of the lenses, whatever the cache holds. */
  extraCredits: number;
}): AnalysisPlan {
  const billable = new Set(args.billable);
  const plans = firstCopies(args.sha256s).map((source, i) => {
    const first = source === i;
    const have = new Set(args.cached[args.sha256s[i]!] ?? []);
    const ran = first ? args.lenses.filter((l) => !have.has(l)) : [];
    return { ran, billed: ran.filter((l) => billable.has(l)), first, source };
  });
  return { plans, needed: plans.reduce((n, p) => n + p.billed.length * LENS_CREDITS, args.extraCredits) };
}

/** What a vehicle-condition report runs: one per-photo step per new photo, one synthesis, a flat price. */
export interface VehiclePlan {
  /** Per image: index of its photo's first copy in the request. */
  sources: number[];
  /** Photos (first copies, in request order) whose per-photo findings must be produced. */
  todo: string[];
  /** Per-photo findings already in the caller's registry, by photo. */
  known: Record<string, Record<string, unknown>>;
  needed: number;
}

export function planVehicleReport(args: {
  sha256s: readonly string[];
  known: Readonly<Record<string, Record<string, unknown>>>;
  credits: number;
}): VehiclePlan {
  const sources = firstCopies(args.sha256s);
  const todo = args.sha256s.filter((sha, i) => sources[i] === i && !args.known[sha]);
  return { sources, todo, known: { ...args.known }, needed: args.credits };
}
