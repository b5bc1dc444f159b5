import type { Db } from '../db/pool.ts';

/**
 * The console's people as better-auth stores them (db/migrations/*console-auth.sql: `console_users`,
 * `console_sessions`, `console_identities`, `console_verifications`). better-auth writes these
 * tables itself; the statements of ours over them live here (docs/architecture.md "Who owns
 * accounts"): a person's sign-in methods and sessions, the newest sign-in link, and the erasure of
 * a person's console account.
 */

export interface ConsolePerson {
  id: string;
  email: string;
  name: string;
  emailVerified: boolean;
}

/** One person by id, as the sign-in hook needs them; null when there is none. */
export async function consolePerson(db: Db, personId: string): Promise<ConsolePerson | null> {
  const r = await db.query<{ id: string; email: string; name: string; email_verified: boolean }>(
    'SELECT id, email, name, email_verified FROM console_users WHERE id = $1',
    [personId],
  );
  const u = r.rows[0];
  return u ? { id: u.id, email: u.email, name: u.name, emailVerified: u.email_verified } : null;
}

export interface SignInIdentity {
  id: string;
  /** `credential` for a password, else the identity provider's id (`github`, `google`). */
  providerId: string;
  createdAt: Date;
}

/** A person's identities (a password, each linked provider), oldest first. */
export async function signInIdentities(db: Db, personId: string): Promise<SignInIdentity[]> {
  const r = await db.query<{ id: string; provider_id: string; created_at: Date }>(
    'SELECT id, provider_id, created_at FROM console_identities WHERE user_id = $1 ORDER BY created_at, id',
    [personId],
  );
  return r.rows.map((row) => ({ id: row.id, providerId: row.provider_id, createdAt: row.created_at }));
}

export interface SessionRow {
  id: string;
  createdAt: Date;
  updatedAt: Date;
  ipAddress: string | null;
  userAgent: string | null;
}

/** A person's sessions that have not expired, newest first (by id, never by token). */
export async function activeSessions(db: Db, personId: string): Promise<SessionRow[]> {
  const r = await db.query<{ id: string; created_at: Date; updated_at: Date; ip_address: string | null; user_agent: string | null }>(
    'SELECT id, created_at, updated_at, ip_address, user_agent FROM console_sessions WHERE user_id = $1 AND expires_at > now() ORDER BY created_at DESC, id',
    [personId],
  );
  return r.rows.map((row) => ({ id: row.id, createdAt: row.created_at, updatedAt: row.updated_at, ipAddress: row.ip_address, userAgent: row.user_agent }));
}

/** Ends one of the person's sessions; false when they have none by that id. */
export async function endSession(db: Db, personId: string, sessionId: string): Promise<boolean> {
  const r = await db.query('DELETE FROM console_sessions WHERE id = $1 AND user_id = $2', [sessionId, personId]);
  return Boolean(r.rowCount);
}

/**
 * Removes one of the person's identities and ends every session but `keepSessionId` (whoever came
 * in by that method is out). Returns how many sessions ended.
 */
export async function removeIdentity(db: Db, personId: string, identityId: string, keepSessionId: string): Promise<number> {
  await db.query('DELETE FROM console_identities WHERE id = $1 AND user_id = $2', [identityId, personId]);
  const ended = await db.query('DELETE FROM console_sessions WHERE user_id = $1 AND id <> $2', [personId, keepSessionId]);
  return ended.rowCount ?? 0;
}

/**
 * A newer sign-in link replaces the older ones: only the newest magic-link row for the address
 * stays (better-auth keeps each link as a `magic-link:{hash}` verification row whose value names
 * the address). Run after each link is sent, so two requests at once still leave one link.
 */
export async function keepNewestMagicLink(db: Db, email: string): Promise<number> {
  const r = await db.query(
    `WITH links AS (
       SELECT id, created_at FROM console_verifications
        WHERE identifier LIKE 'magic-link:%'
          AND lower(CASE WHEN identifier LIKE 'magic-link:%' AND value LIKE '{%' THEN value::jsonb->>'email' END) = lower($1)
     )
     DELETE FROM console_verifications WHERE id IN (SELECT id FROM links ORDER BY created_at DESC, id DESC OFFSET 1)`,
    [email.trim()],
  );
  return r.rowCount ?? 0;
}

/**
 * The person's console account goes: their pending verifications by address, then the person, with
 * their sessions, sign-in methods, pending invitations they sent and memberships by cascade. Their
 * workspaces are dealt with before (accounts/erase.ts, accounts/members.ts).
 */
export async function eraseConsolePerson(db: Db, person: { id: string; email: string }): Promise<void> {
  await db.query('DELETE FROM console_verifications WHERE lower(identifier) = lower($1)', [person.email]);
  await db.query('DELETE FROM console_users WHERE id = $1', [person.id]);
}
