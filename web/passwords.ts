import { hash as argon2Hash, verify as argon2Verify } from '@node-rs/argon2';
import { dictionary } from '@zxcvbn-ts/language-common';

/**
 * Console passwords per NIST SP 800-63B-4 (5.1.1.2): a password that is the only factor is at
 * least 15 characters; at least 64 are allowed (we take 128); no composition rules; every
 * printable character and spaces allowed; refused when it is a commonly used password, repetitive
 * or sequential, or made of context words (the service's name, the person's own address). Stored
 * as argon2id with OWASP's parameters (19 MiB, 2 passes, 1 lane).
 */
export const PASSWORD_MIN = 15;
export const PASSWORD_MAX = 128;

/** 49,233 passwords most often seen in breaches (zxcvbn-ts's common list), lowercased. */
const COMMON = new Set((dictionary['passwords-common'] as string[]).map((p) => p.toLowerCase()));

const SEQUENCES = ['abcdefghijklmnopqrstuvwxyz', '0123456789', 'qwertyuiopasdfghjklzxcvbnm', '1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p'];

/** Why this password is refused, in words a person can act on; null when it is fine. */
export function passwordProblem(password: string, context: { email?: string } = {}): string | null {
  const length = [...password].length;
  if (length < PASSWORD_MIN) return `Use at least ${PASSWORD_MIN} characters (a few unrelated words make a good one).`;
  if (length > PASSWORD_MAX) return `Use at most ${PASSWORD_MAX} characters.`;
  const lower = password.toLowerCase();
  const squeezed = lower.replace(/[\s._-]+/g, '');
  if (COMMON.has(lower) || COMMON.has(squeezed)) return 'This password is on lists of commonly used passwords; choose another.';
  // One short unit repeated ("aaaaaaaaaaaaaaa", "abcabcabcabcabc", "passwordpassword").
  if (/^(.{1,8}?)\1+$/su.test(squeezed)) return 'Repeated characters or words are easy to guess; choose another.';
  for (const seq of SEQUENCES) {
    for (const s of [seq, [...seq].reverse().join('')]) if (s.includes(squeezed) || (squeezed.length >= 10 && isRunOf(squeezed, s))) return 'Sequences like "abcdef…" or "123456…" are easy to guess; choose another.';
  }
  // Context words: what is left once the service's name and the address are taken out.
  let rest = squeezed.replaceAll('lenstack', '');
  const address = context.email?.toLowerCase().trim().replace(/[\s._-]+/g, '');
  if (address) {
    rest = rest.replaceAll(address, '');
    const local = address.split('@')[0];
    if (local && local.length >= 3) rest = rest.replaceAll(local, '');
  }
  if (rest.replace(/[0-9!?.#*@$%&+]/g, '').length < 6) return 'Do not build the password from your e-mail address or the service name; choose another.';
  return null;
}

/** The whole text is a run along one keyboard or alphabet sequence, wrapping allowed ("xyzabc…"). */
function isRunOf(text: string, seq: string): boolean {
  const doubled = seq + seq;
  return doubled.includes(text);
}

// OWASP Password Storage Cheat Sheet: argon2id (the library's default algorithm), m=19456 KiB, t=2, p=1.
const ARGON2 = { memoryCost: 19_456, timeCost: 2, parallelism: 1 };

export function hashPassword(password: string): Promise<string> {
  return argon2Hash(password, ARGON2);
}

export async function verifyPassword(hash: string, password: string): Promise<boolean> {
  try {
    return await argon2Verify(hash, password);
  } catch {
    return false;
  }
}
