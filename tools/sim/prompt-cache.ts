import { createHash } from 'node:crypto';
import type { VendorName } from '../../core/config.ts';
import { VENDOR_NAMES } from '../../core/vendor-names.ts';
import { SIM_PROTOCOLS } from './protocols/index.ts';

/**
 * The vendors' prompt caches as the sim plays them. A request is a list of segments in the order
 * the vendor's cache reads it (each vendor's simulator.ts); a prefix of whole segments seen before, for the
 * same vendor and model within the TTL, is served from the cache. Real caches match prefixes
 * token by token; whole segments (a schema, a system text, a text block, an image) are as fine as
 * the product's prompts need. Each vendor's rules are its protocol's `cache`
 * (vendors/<vendor>/simulator.ts: which prefixes are cached, from how many tokens, for how long).
 * Every hit refreshes the entry's TTL, as the vendors do.
 */

/** One piece of a prompt: text the vendor tokenizes, or the index of an image of the call. */
export type PromptSegment = ({ text: string } | { image: number }) & {
  /** Anthropic: the block carries `cache_control`. */
  breakpoint?: boolean;
};

export interface CacheRules {
  /** Every prefix is cached (OpenAI, Gemini), or only up to a breakpoint (Anthropic). */
  automatic: boolean;
  minTokens: number;
  /** Beyond minTokens, the cached part grows in steps of this many tokens. */
  step: number;
  ttlMs: number;
}

/** Each vendor's rules, from its protocol (vendors/<vendor>/simulator.ts). */
export const CACHE_RULES: Record<VendorName, CacheRules> = Object.fromEntries(VENDOR_NAMES.map((v) => [v, SIM_PROTOCOLS[v].cache])) as Record<VendorName, CacheRules>;

export interface CacheUse {
  /** Input tokens read from the cache. */
  cachedTokens: number;
  /** Input tokens written to the cache (Anthropic's breakpoints only). */
  cacheWriteTokens: number;
}

/** Per segment: its tokens and the hash of the prompt up to and including it. */
export interface SegmentSeen {
  kind: 'text' | 'image';
  tokens: number;
  /** sha256 of everything the vendor read up to and including this segment (text bytes, image bytes). */
  prefixHash: string;
  breakpoint: boolean;
}

export function describeSegments(segments: PromptSegment[], images: Buffer[], imageTokens: number[], textTokens: (s: string) => number): SegmentSeen[] {
  const h = createHash('sha256');
  return segments.map((s) => {
    const image = 'image' in s;
    const bytes = image ? images[s.image]! : Buffer.from(s.text, 'utf8');
    // Kind and length first, so segment boundaries are part of the hash.
    h.update(`${image ? 'i' : 't'}${bytes.length}:`).update(bytes);
    return {
      kind: image ? 'image' : 'text',
      tokens: image ? imageTokens[s.image]! : textTokens(s.text),
      prefixHash: h.copy().digest('hex'),
      breakpoint: s.breakpoint === true,
    };
  });
}

export function createPromptCache(clock: () => number = Date.now) {
  /** `${vendor}|${model}|${prefixHash}` → when the entry expires. */
  const entries = new Map<string, number>();

  function use(vendor: VendorName, model: string, segments: SegmentSeen[]): CacheUse {
    const rules = CACHE_RULES[vendor];
    const now = clock();
    const key = (s: SegmentSeen) => `${vendor}|${model}|${s.prefixHash}`;
    const fresh = (s: SegmentSeen) => (entries.get(key(s)) ?? 0) > now;
    let total = 0;
    const ends = segments.map((s) => (total += s.tokens));
    // Where the cache may end: after any segment (automatic), or at a breakpoint.
    const candidates = segments.map((s, i) => i).filter((i) => (rules.automatic || segments[i]!.breakpoint) && ends[i]! >= rules.minTokens);
    if (candidates.length === 0) return { cachedTokens: 0, cacheWriteTokens: 0 };
    const hit = candidates.filter((i) => fresh(segments[i]!)).at(-1);
    const rounded = (tokens: number) => rules.minTokens + Math.floor((tokens - rules.minTokens) / rules.step) * rules.step;
    const cachedTokens = hit === undefined ? 0 : rounded(ends[hit]!);
    for (const i of candidates) entries.set(key(segments[i]!), now + rules.ttlMs);
    // Anthropic bills what its breakpoints add beyond the hit as a cache write.
    const last = candidates.at(-1)!;
    const cacheWriteTokens = rules.automatic || last === hit ? 0 : ends[last]! - (hit === undefined ? 0 : ends[hit]!);
    for (const [k, expires] of entries) if (expires <= now) entries.delete(k);
    return { cachedTokens, cacheWriteTokens };
  }

  return { use, reset: () => entries.clear() };
}
