/**
 * The lens delta of one analysis: which lenses each image still needs and which of those bill.
 * Pure and deterministic, so the workflow and the activity that reserves the credits compute the
 * very same plan from the same registry snapshot.
 */
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

export function planDelta(args: {
  sha256s: string[];
  lenses: string[];
  billable: string[];
  /** Per photo, the requested lenses the caller's projection already holds. */
  cached: Record<string, string[]>;
}): { plans: ImagePlan[]; needed: number } {
  // The same photo twice in one request is analyzed and billed once.
  const firstIndex = new Map<string, number>();
  args.sha256s.forEach((sha, i) => {
    if (!firstIndex.has(sha)) firstIndex.set(sha, i);
  });
  const plans = args.sha256s.map((sha, i) => {
    const source = firstIndex.get(sha)!;
    const first = source === i;
    const have = new Set(args.cached[sha] ?? []);
    const ran = first ? args.lenses.filter((l) => !have.has(l)) : [];
    const billed = ran.filter((l) => args.billable.includes(l));
    return { ran, billed, first, source };
  });
  return { plans, needed: plans.reduce((n, p) => n + p.billed.length, 0) };
}
