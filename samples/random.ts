import { createHash } from 'node:crypto';

/** A deterministic stream of floats in [0, 1). */
export type Rng = () => number;

/**
 * sfc32 seeded from the SHA-256 of a text key: the same key always gives the same stream, and
 * unrelated keys give unrelated streams (so each schema node can have its own stream, keyed by
 * image hash + path, and adding a property does not shift the values of the others).
 */
export function rngFor(key: string): Rng {
  const h = createHash('sha256').update(key).digest();
  let a = h.readUInt32LE(0);
  let b = h.readUInt32LE(4);
  let c = h.readUInt32LE(8);
  let d = h.readUInt32LE(12);
  return () => {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    const t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    const r = (t + d) | 0;
    c = (c + r) | 0;
    return (r >>> 0) / 4294967296;
  };
}

/** Integer in [lo, hi] (inclusive). */
export function intIn(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

export function pick<T>(rng: Rng, items: readonly T[]): T {
  const item = items[Math.floor(rng() * items.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

export function sha256Hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}
