/** 64-bit hashes travel as 16 lowercase hex chars and are stored as signed bigint in Postgres. */
export const HEX64 = /^[0-9a-f]{16}$/;

export function hexToSigned64(hex: string): string {
  if (!HEX64.test(hex)) throw new Error(`not a 64-bit hex hash: ${hex}`);
  return BigInt.asIntN(64, BigInt('0x' + hex)).toString();
}

export function signed64ToHex(v: string | number | bigint): string {
  return BigInt.asUintN(64, BigInt(v)).toString(16).padStart(16, '0');
}

/** The four 16-bit chunks of a hash, most significant first (multi-index hashing keys). */
export function hashChunks(hex: string): [number, number, number, number] {
  if (!HEX64.test(hex)) throw new Error(`not a 64-bit hex hash: ${hex}`);
  return [0, 4, 8, 12].map((i) => parseInt(hex.slice(i, i + 4), 16)) as [number, number, number, number];
}
