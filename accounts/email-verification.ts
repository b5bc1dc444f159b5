import { createHash, randomBytes } from 'node:crypto';
import { newId } from '../auth/repository.ts';
import { validationFailed } from '../core/errors.ts';
import { grantSignupCredits } from '../credits/signup.ts';
import { inTransaction, type Db } from '../db/pool.ts';
import { accountNotFound } from './users.ts';

/** How long an e-mail verification link works. */
export const EMAIL_VERIFICATION_TTL_MS = 24 * 60 * 60 * 1000;

/** `evt_` + 32 random bytes, base64url (256 bits). */
export const VERIFICATION_TOKEN_PATTERN = /^evt_[A-Za-z0-9_-]{43}$/;

const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

/**
 * Start verifying an account's e-mail address: a random token for the link the dashboard mails.
 * Only its SHA-256 is stored; the token itself is returned once.
 */
export async function createEmailVerification(
  db: Db,
  args: { accountId: string; now?: Date; ttlMs?: number },
): Promise<{ token: string; expiresAt: string }> {
  const now = args.now ?? new Date();
  const u = await db.query<{ email: string; email_verified_at: Date | null }>('SELECT email, email_verified_at FROM users WHERE id = $1', [args.accountId]);
  const account = u.rows[0];
  if (!account) throw accountNotFound(args.accountId);
  if (account.email_verified_at) throw validationFailed('userId: this e-mail address is already verified');
  const token = `evt_${randomBytes(32).toString('base64url')}`;
  const expiresAt = new Date(now.getTime() + (args.ttlMs ?? EMAIL_VERIFICATION_TTL_MS));
  await db.query(
    'INSERT INTO email_verification_tokens (id, user_id, token_hash, email, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [newId('evt'), args.accountId, hashToken(token), account.email, now, expiresAt],
  );
  return { token, expiresAt: expiresAt.toISOString() };
}

/**
 * Use a verification token: marks the e-mail verified and grants the signup's 1,000 community
 * credits, in one transaction. A token works once and only before it expires; concurrent uses of
 * one token are serialized on its row, so exactly one of them succeeds. `granted` is 0 when the
 * address had been verified before (through another token).
 */
export async function verifyEmail(
  db: Db,
  args: { token: string; now?: Date },
): Promise<{ userId: string; emailVerifiedAt: string; granted: number }> {
  const now = args.now ?? new Date();
  const invalid = (why: string) => validationFailed(`token: ${why}; ask for a new verification e-mail`);
  if (!VERIFICATION_TOKEN_PATTERN.test(args.token)) throw invalid('not a verification token');
  return inTransaction(db, async (c) => {
    const r = await c.query<{ id: string; user_id: string; email: string; expires_at: Date; used_at: Date | null }>(
      'SELECT id, user_id, email, expires_at, used_at FROM email_verification_tokens WHERE token_hash = $1 FOR UPDATE',
      [hashToken(args.token)],
    );
    const t = r.rows[0];
    if (!t) throw invalid('unknown token');
    if (t.used_at) throw invalid('this token was already used');
    if (t.expires_at.getTime() <= now.getTime()) throw invalid('this token has expired');
    await c.query('UPDATE email_verification_tokens SET used_at = $2 WHERE id = $1', [t.id, now]);
    const u = await c.query<{ email_verified_at: Date }>(
      // The token proves the address it was sent to, not whatever the account says now.
      'UPDATE users SET email_verified_at = coalesce(email_verified_at, $2) WHERE id = $1 AND lower(email) = lower($3) RETURNING email_verified_at',
      [t.user_id, now, t.email],
    );
    if (!u.rows[0]) throw invalid('the account e-mail address changed since this token was sent');
    const granted = await grantSignupCredits(c, t.user_id, 'emailVerified');
    return { userId: t.user_id, emailVerifiedAt: u.rows[0].email_verified_at.toISOString(), granted };
  });
}
