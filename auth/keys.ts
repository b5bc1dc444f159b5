import { createHash, randomBytes } from 'node:crypto';

export type KeyKind = 'live' | 'test';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 40 base62 characters ≈ 238 bits of entropy. */
const SECRET_LENGTH = 40;

export const KEY_PATTERN = /^svc_(live|test)_[0-9A-Za-z]{40}$/;

/**
 * The public anonymous sandbox key (docs/contract.md "Authentication" 4): documented in the README and
 * llms.txt, bound to no account, rate-limited per IP, answered with fixtures only.
 */
export const ANONYMOUS_SANDBOX_KEY = 'svc_test_' + 'public'.padEnd(SECRET_LENGTH, '0');

export function generateKey(kind: KeyKind): string {
  // Rejection sampling keeps every character uniformly distributed (no modulo bias).
  let out = '';
  while (out.length < SECRET_LENGTH) {
    for (const b of randomBytes(SECRET_LENGTH * 2)) {
      if (b < 248 && out.length < SECRET_LENGTH) out += ALPHABET[b % 62];
    }
  }
  return `svc_${kind}_${out}`;
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function keyKind(key: string): KeyKind | null {
  const m = KEY_PATTERN.exec(key);
  return m ? (m[1] as KeyKind) : null;
}

/** What a dashboard may show of a key: its prefix and last four characters. */
export function keyDisplay(key: string): { prefix: string; last4: string } {
  return { prefix: key.slice(0, 'svc_live_'.length), last4: key.slice(-4) };
}
