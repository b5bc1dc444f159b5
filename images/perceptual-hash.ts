/**
 * Pure 64-bit perceptual hashes over greyscale pixels (no I/O, no sharp), so they can be tested
 * on hand-made inputs. Both hashes are written as 16 lowercase hex chars, most significant bit
 * first: bit 0 of the list below is the top bit of the first hex digit.
 *
 * pHash: 32×32 grey → orthonormal 2-D DCT-II → the 8×8 lowest frequencies, row-major
 *   (bit 8·u + v is coefficient (u = vertical, v = horizontal frequency)), each bit 1 when the
 *   coefficient is above the median of the 63 AC coefficients. The DC term is left out of the
 *   median (it is the mean brightness, far above the rest) but keeps its bit, which is therefore
 *   1 for any image that is not black.
 * dHash: 9×8 grey, row by row, bit 8·r + c is 1 when pixel (r, c+1) is brighter than (r, c).
 */

export const HASH_GRID = { dct: 32, dctLow: 8, gradientW: 9, gradientH: 8 } as const;

const N = HASH_GRID.dct;
const K = HASH_GRID.dctLow;

// COS[k * N + n] = s(k) · cos(π (2n + 1) k / 2N): the orthonormal DCT-II basis, low k only.
const COS = (() => {
  const table = new Float64Array(K * N);
  for (let k = 0; k < K; k++) {
    const scale = k === 0 ? Math.sqrt(1 / N) : Math.sqrt(2 / N);
    for (let n = 0; n < N; n++) table[k * N + n] = scale * Math.cos((Math.PI * (2 * n + 1) * k) / (2 * N));
  }
  return table;
})();

/** The 8×8 low-frequency block of the 2-D DCT-II of a 32×32 image, row-major. */
export function lowFrequencyDct(grey32: Float64Array): Float64Array {
  if (grey32.length !== N * N) throw new RangeError(`expected ${N}×${N} pixels`);
  const rows = new Float64Array(N * K); // rows[y * K + v]: each row transformed horizontally
  for (let y = 0; y < N; y++) {
    for (let v = 0; v < K; v++) {
      let sum = 0;
      for (let x = 0; x < N; x++) sum += grey32[y * N + x]! * COS[v * N + x]!;
      rows[y * K + v] = sum;
    }
  }
  const out = new Float64Array(K * K);
  for (let u = 0; u < K; u++) {
    for (let v = 0; v < K; v++) {
      let sum = 0;
      for (let y = 0; y < N; y++) sum += rows[y * K + v]! * COS[u * N + y]!;
      // Drop float noise (~1e-13) so exact ties, as in flat images, stay ties on every platform.
      out[u * K + v] = Math.round(sum * 1e6) / 1e6;
    }
  }
  return out;
}

export function dctHash(grey32: Float64Array): string {
  const coeffs = lowFrequencyDct(grey32);
  const ac = Array.from(coeffs.subarray(1)).sort((a, b) => a - b);
  const median = ac[(ac.length - 1) / 2]!; // 63 values: the 32nd, no averaging needed
  return bitsToHex(Array.from(coeffs, (c) => c > median));
}

export function gradientHash(grey9x8: Float64Array): string {
  const { gradientW: w, gradientH: h } = HASH_GRID;
  if (grey9x8.length !== w * h) throw new RangeError(`expected ${w}×${h} pixels`);
  const bits: boolean[] = [];
  for (let r = 0; r < h; r++) {
    for (let c = 0; c < w - 1; c++) bits.push(grey9x8[r * w + c + 1]! > grey9x8[r * w + c]!);
  }
  return bitsToHex(bits);
}

/** Mean of each (srcW/dstW)×(srcH/dstH) block; the sizes must divide exactly. */
export function boxDownsample(src: Uint8Array, srcW: number, srcH: number, dstW: number, dstH: number): Float64Array {
  if (src.length !== srcW * srcH || srcW % dstW !== 0 || srcH % dstH !== 0) throw new RangeError('sizes must divide exactly');
  const bw = srcW / dstW;
  const bh = srcH / dstH;
  const out = new Float64Array(dstW * dstH);
  for (let y = 0; y < srcH; y++) {
    const rowOut = Math.floor(y / bh) * dstW;
    for (let x = 0; x < srcW; x++) out[rowOut + Math.floor(x / bw)]! += src[y * srcW + x]!;
  }
  for (let i = 0; i < out.length; i++) out[i]! /= bw * bh;
  return out;
}

function bitsToHex(bits: boolean[]): string {
  let hex = '';
  for (let i = 0; i < bits.length; i += 4) {
    hex += ((Number(bits[i]) << 3) | (Number(bits[i + 1]) << 2) | (Number(bits[i + 2]) << 1) | Number(bits[i + 3])).toString(16);
  }
  return hex;
}

const POPCOUNT4 = [0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4];

/** Differing bits between two equal-length hex hashes (case-insensitive). */
export function hammingDistance(a: string, b: string): number {
  if (a.length !== b.length || !/^[0-9a-f]*$/i.test(a) || !/^[0-9a-f]*$/i.test(b)) {
    throw new RangeError('hammingDistance needs two hex strings of equal length');
  }
  let distance = 0;
  for (let i = 0; i < a.length; i++) distance += POPCOUNT4[parseInt(a[i]!, 16) ^ parseInt(b[i]!, 16)]!;
  return distance;
}
