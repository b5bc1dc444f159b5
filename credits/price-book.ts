/**
 * The price book: every price Lenstack charges or sells at, and nothing else (docs/contract.md
 * "What the service does" 1 to 5). What an analysis, an extraction, a vehicle report or an
 * enrichment costs in credits, and what a pack of credits costs in money, are read from here.
 * Pure data: workflow code imports it too (it must stay deterministic, free of node imports).
 */

/** 1 credit = 0.01 USD. */
export const CENTS_PER_CREDIT = 1;

/** Credits per billable lens per image (moderation is not billable; cache hits are free). */
export const LENS_CREDITS = 1;

/** Credits a bespoke extraction costs per call, whatever the cache holds (docs/contract.md, /v2/analyze). */
export const BESPOKE_CREDITS = 5;

/** Credits a vehicle-condition report costs, whatever the number of photos (docs/contract.md: 1). */
export const VEHICLE_REPORT_CREDITS = 1;

/** Enrichment costs 5 credits a call (docs/contract.md "What the service does" 4). */
export const ENRICH_CREDITS = 5;

/**
 * Credit packs (docs/contract.md "What the service does" 5): three sizes at CENTS_PER_CREDIT, the
 * first pack a person ever buys ships with 2× the credits at the same price. Purchased credits
 * land in the purchased pool and never expire.
 */
export const PACK_NAMES = ['starter', 'pro', 'business'] as const;
export type PackName = (typeof PACK_NAMES)[number];

export interface Pack {
  name: PackName;
  label: string;
  credits: number;
  priceCents: number;
}

const pack = (name: PackName, label: string, credits: number): Pack => ({ name, label, credits, priceCents: credits * CENTS_PER_CREDIT });

export const PACKS: Readonly<Record<PackName, Pack>> = {
  starter: pack('starter', 'Starter', 1_000),
  pro: pack('pro', 'Pro', 10_000),
  business: pack('business', 'Business', 100_000),
};

export function isPackName(s: string): s is PackName {
  return (PACK_NAMES as readonly string[]).includes(s);
}

/** What buying `p` grants: its credits, plus as many again when it is the account's first pack. */
export function packGrant(p: Pack, firstPack: boolean): { credits: number; bonusCredits: number; priceCents: number } {
  return { credits: p.credits, bonusCredits: firstPack ? p.credits : 0, priceCents: p.priceCents };
}

/** What a pack is called on a receipt and a hosted payment page. */
export const packDescription = (p: Pack): string => `Lenstack ${p.label} pack: ${p.credits.toLocaleString('en-US')} credits`;
