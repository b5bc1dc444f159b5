import { intIn, pick, rngFor } from '../../../samples/random.ts';

/**
 * The hostile corpora's seeded random source, so every corpus is the same on every run: a failure
 * names a seed and an index, and re-running reproduces it exactly. The stream is the simulator's
 * (samples/random.ts), keyed by the seed and each fork's labels.
 */
export interface Prng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Integer in [0, n). */
  int(n: number): number;
  /** Integer in [lo, hi]. */
  range(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
  /** A child generator whose stream depends only on this one's seed and the label. */
  fork(label: string): Prng;
}

export function prng(seed: number): Prng {
  return keyed(`hostile:${seed}`);
}

function keyed(key: string): Prng {
  const next = rngFor(key);
  return {
    next,
    int: (n) => Math.floor(next() * n),
    range: (lo, hi) => intIn(next, lo, hi),
    pick: (items) => pick(next, items),
    chance: (p) => next() < p,
    fork: (label) => keyed(`${key}:${label}`),
  };
}
