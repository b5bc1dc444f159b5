import { randomBytes } from 'node:crypto';
import { inTransaction, type Db } from '../db/pool.ts';
import { generateKey, hashKey, keyDisplay, type KeyKind } from './keys.ts';

export interface KeyRecord {
  id: string;
  keyHash: string;
  accountId: string | null;
  kind: KeyKind;
  revoked: boolean;
}

export interface KeyListing {
  id: string;
  kind: KeyKind;
  prefix: string;
  last4: string;
  name: string | null;
  createdAt: string;
  /** Minute resolution (auth/key-usage.ts); null until first used. */
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

/** The personal account (`kind = 'personal'`) with this e-mail address, if any. */
export async function findAccountByEmail(db: Db, email: string): Promise<string | null> {
  const r = await db.query<{ id: string }>("SELECT id FROM users WHERE lower(email) = lower($1) AND kind = 'personal'", [email.trim()]);
  return r.rows[0]?.id ?? null;
}

export async function accountExists(db: Db, accountId: string): Promise<boolean> {
  const r = await db.query('SELECT 1 FROM users WHERE id = $1', [accountId]);
  return (r.rowCount ?? 0) > 0;
}

/** Issue a key; the plaintext is returned once and never stored. */
export async function issueKey(
  db: Db,
  accountId: string,
  kind: KeyKind,
  name: string | null = null,
): Promise<{ keyId: string; key: string; keyHash: string }> {
  const key = generateKey(kind);
  const keyHash = hashKey(key);
  const { prefix, last4 } = keyDisplay(key);
  const keyId = newId('key');
  await db.query(
    'INSERT INTO api_keys (id, user_id, key_hash, kind, prefix, last4, name) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [keyId, accountId, keyHash, kind, prefix, last4, name],
  );
  return { keyId, key, keyHash };
}

export async function findKeyByHash(db: Db, keyHash: string): Promise<KeyRecord | null> {
  const r = await db.query<{ id: string; key_hash: string; user_id: string | null; kind: KeyKind; revoked_at: Date | null }>(
    'SELECT id, key_hash, user_id, kind, revoked_at FROM api_keys WHERE key_hash = $1',
    [keyHash],
  );
  const row = r.rows[0];
  if (!row) return null;
  return { id: row.id, keyHash: row.key_hash, accountId: row.user_id, kind: row.kind, revoked: row.revoked_at !== null };
}

export async function listKeys(db: Db, accountId: string): Promise<KeyListing[]> {
  const r = await db.query<{
    id: string; kind: KeyKind; prefix: string; last4: string; name: string | null; created_at: Date; last_used_at: Date | null; revoked_at: Date | null;
  }>('SELECT id, kind, prefix, last4, name, created_at, last_used_at, revoked_at FROM api_keys WHERE user_id = $1 ORDER BY created_at', [accountId]);
  return r.rows.map((k) => ({
    id: k.id,
    kind: k.kind,
    prefix: k.prefix,
    last4: k.last4,
    name: k.name,
    createdAt: k.created_at.toISOString(),
    lastUsedAt: k.last_used_at?.toISOString() ?? null,
    revokedAt: k.revoked_at?.toISOString() ?? null,
  }));
}

/**
 * Revoke by key id (only a key of `opts.accountId` when given); returns the key hash so callers can
 * evict it from every cache. Revoking a revoked key keeps its first revocation time.
 */
export async function revokeKey(
  db: Db,
  keyId: string,
  opts: { accountId?: string } = {},
): Promise<{ keyHash: string; userId: string | null; revokedAt: string } | null> {
  const r = await db.query<{ key_hash: string; user_id: string | null; revoked_at: Date }>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
      WHERE id = $1 AND ($2::text IS NULL OR user_id = $2) RETURNING key_hash, user_id, revoked_at`,
    [keyId, opts.accountId ?? null],
  );
  const row = r.rows[0];
  return row ? { keyHash: row.key_hash, userId: row.user_id, revokedAt: row.revoked_at.toISOString() } : null;
}
