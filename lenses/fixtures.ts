import { canonicalOrder, getLens } from './index.ts';
import type { LensName } from './types.ts';

/**
 * What svc_test_ keys get (docs/contract.md "What the service does" 6): the lenses' fixtures merged
 * into one flat output, in catalog order. A fresh copy each call, so callers may mutate it.
 */
export function sandboxOutput(lenses: readonly LensName[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of canonicalOrder(lenses)) Object.assign(out, structuredClone(getLens(name).fixture));
  return out;
}

/** Sandbox output split per lens, the shape registry records and the enrich step work with. */
export function sandboxPerLens(lenses: readonly LensName[]): Partial<Record<LensName, Record<string, unknown>>> {
  return Object.fromEntries(canonicalOrder(lenses).map((n) => [n, structuredClone(getLens(n).fixture) as Record<string, unknown>]));
}
