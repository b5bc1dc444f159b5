import { inject } from 'vitest';

/**
 * How big each hostile suite runs. `npm test` (CI) runs the reduced size, which still covers
 * every category; `npm run hostile` (test/hostile/full.config.ts) provides `hostileScale: full`.
 * Every corpus is seeded: the same size gives the same cases on every run.
 */

declare module 'vitest' {
  export interface ProvidedContext {
    /** Set by the full-size config only. */
    hostileScale?: 'ci' | 'full';
  }
}

export const SIZES = {
  ci: {
    /** SSRF URLs drawn from the corpus, spread over every category (each sent to 5 endpoints). */
    ssrfUrls: 60,
    /** Byte-mutated copies of the shared photos. */
    imageMutants: 100,
    /**
     * Share of the mutants (a seeded draw) also sent to POST /v1/analyze, which runs a real
     * analysis for each one intake accepts; the others go to lookup and enrich only. Every other
     * image category goes to analyze whole.
     */
    analyzeMutantShare: 0.25,
    /** Cut points per base file (each format), besides the fixed ones. */
    truncationsPerFormat: 4,
    /** Malformed requests from the OpenAPI document, over all operations. */
    fuzzRequests: 1_500,
    /** Share of them sent over a real socket (raw HTTP/1.1) instead of app.inject. */
    fuzzSocketShare: 0.2,
  },
  full: {
    ssrfUrls: Number.POSITIVE_INFINITY, // the whole corpus
    imageMutants: 600,
    analyzeMutantShare: 1,
    truncationsPerFormat: 40,
    fuzzRequests: 20_000,
    fuzzSocketShare: 0.15,
  },
} as const;

export const SEED = 0x1e57ac; // "lenstack": change it to explore, keep it to reproduce

export type Scale = keyof typeof SIZES;

export function hostileScale(): Scale {
  return inject('hostileScale') === 'full' ? 'full' : 'ci';
}

export function sizes(): (typeof SIZES)[Scale] {
  return SIZES[hostileScale()];
}
