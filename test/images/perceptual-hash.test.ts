import { describe, expect, it } from 'vitest';
import { boxDownsample, dctHash, gradientHash, hammingDistance, lowFrequencyDct } from '../../images/perceptual-hash.ts';

const N = 32;
const s = (k: number) => (k === 0 ? Math.sqrt(1 / N) : Math.sqrt(2 / N));
/** Orthonormal 2-D DCT-II basis image: u varies down the rows (y), v along the columns (x). */
const basis = (u: number, v: number) =>
  Float64Array.from({ length: N * N }, (_, i) => {
    const y = Math.floor(i / N);
    const x = i % N;
    return s(u) * s(v) * Math.cos((Math.PI * (2 * y + 1) * u) / (2 * N)) * Math.cos((Math.PI * (2 * x + 1) * v) / (2 * N));
  });
/** The image whose low-frequency DCT block is exactly `coeffs` (row-major 8×8). */
const synthesize = (coeffs: number[]) => {
  const img = new Float64Array(N * N);
  coeffs.forEach((c, i) => {
    const b = basis(Math.floor(i / 8), i % 8);
    for (let p = 0; p < img.length; p++) img[p]! += c * b[p]!;
  });
  return img;
};

describe('lowFrequencyDct', () => {
  it('recovers the coefficients of a synthesized image (orthonormal DCT-II)', () => {
    const coeffs = Array.from({ length: 64 }, (_, i) => (i === 0 ? 4000 : ((i * 37) % 64) - 32));
    const got = lowFrequencyDct(synthesize(coeffs));
    coeffs.forEach((c, i) => expect(got[i]).toBeCloseTo(c, 9));
  });

  it('puts a horizontal cosine (varies along x) at index 1 = (u 0, v 1)', () => {
    const got = lowFrequencyDct(basis(0, 1).map((p) => p * 100));
    expect(got[1]).toBeCloseTo(100, 9);
    expect(got[8]).toBeCloseTo(0, 9);
  });
});

describe('dctHash (pHash) bit layout', () => {
  it('sets a bit where the coefficient exceeds the median of the 63 AC terms, MSB first, row-major', () => {
    // AC: +10 at odd indices 1..61 (31 of them), −10 elsewhere (32): median = −10.
    // Set bits: 0 (DC 1000 > −10) and 1, 3, …, 61 → 1101 0101 … 0101 0100.
    const coeffs = Array.from({ length: 64 }, (_, i) => (i === 0 ? 1000 : i % 2 === 1 && i <= 61 ? 10 : -10));
    expect(dctHash(synthesize(coeffs))).toBe('d555555555555554');
  });

  it('reads u as the row: the transposed pattern gives a different hash', () => {
    // +10 where u (row) is odd and (u, v) ≠ (7, 7): 31 coefficients.
    const coeffs = Array.from({ length: 64 }, (_, i) => (i === 0 ? 1000 : Math.floor(i / 8) % 2 === 1 && i !== 63 ? 10 : -10));
    expect(dctHash(synthesize(coeffs))).toBe('80ff00ff00ff00fe');
  });

  it('gives a flat image only its DC bit: float noise must not decide the AC bits', () => {
    expect(dctHash(new Float64Array(N * N).fill(200))).toBe('8000000000000000');
    expect(dctHash(new Float64Array(N * N).fill(37.25))).toBe('8000000000000000');
  });
});

describe('gradientHash (dHash) bit layout', () => {
  const grid = (f: (r: number, c: number) => number) => Float64Array.from({ length: 72 }, (_, i) => f(Math.floor(i / 9), i % 9));

  it('is all ones for a left-to-right brightening ramp and all zeros for the reverse', () => {
    expect(gradientHash(grid((_r, c) => c * 10))).toBe('ffffffffffffffff');
    expect(gradientHash(grid((_r, c) => 100 - c * 10))).toBe('0000000000000000');
  });

  it('writes row 0 first, most significant bit first', () => {
    expect(gradientHash(grid((r, c) => (r % 2 === 0 ? c : -c)))).toBe('ff00ff00ff00ff00');
    expect(gradientHash(grid((r, c) => (r === 0 && c === 1 ? 50 : 0)))).toBe('8000000000000000');
  });
});

describe('boxDownsample', () => {
  it('averages exact blocks', () => {
    const src = Uint8Array.from([1, 3, 10, 20, 5, 7, 30, 40]); // 4×2
    expect(Array.from(boxDownsample(src, 4, 2, 2, 1))).toEqual([4, 25]);
    expect(() => boxDownsample(src, 4, 2, 3, 1)).toThrow(RangeError);
  });
});

describe('hammingDistance', () => {
  it('counts differing bits of hex strings', () => {
    expect(hammingDistance('0000000000000000', 'ffffffffffffffff')).toBe(64);
    expect(hammingDistance('8000000000000000', '0000000000000000')).toBe(1);
    expect(hammingDistance('d555555555555554', 'D555555555555554')).toBe(0);
    expect(hammingDistance('0f', 'f0')).toBe(8);
  });

  it('refuses unequal lengths and non-hex input', () => {
    expect(() => hammingDistance('00', '000')).toThrow(RangeError);
    expect(() => hammingDistance('zz', '00')).toThrow(RangeError);
  });
});
