import type { KeyCache } from '../auth/cache.ts';
import { evictEverywhere, type EvictionBus } from '../auth/eviction-bus.ts';
import type { KeyKind } from '../auth/keys.ts';
import { issueKey, listKeys, revokeKey, type KeyListing } from '../auth/repository.ts';
import { AppError } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import { requireAccount } from './users.ts';

/** A newly issued key: the listing plus the key itself, shown this once and never stored. */
export interface IssuedKey extends KeyListing {
  key: string;
}

export async function issueAccountKey(db: Db, args: { accountId: string; kind: KeyKind; name?: string | null }): Promise<IssuedKey> {
  await requireAccount(db, args.accountId);
  const issued = await issueKey(db, args.accountId, args.kind, args.name ?? null);
  const listing = (await listKeys(db, args.accountId)).find((k) => k.id === issued.keyId)!;
  return { ...listing, key: issued.key };
}

/** An account's keys as a dashboard may show them: prefix and last 4, never the secret or its hash. */
export async function listAccountKeys(db: Db, accountId: string): Promise<KeyListing[]> {
  await requireAccount(db, accountId);
  return listKeys(db, accountId);
}

/**
 * Revoke one of an account's keys, evict it from this process's key cache and broadcast the eviction
 * to every API process over Redis. Idempotent: revoking again re-sends the eviction (useful when
 * the first broadcast failed) and keeps the first revocation time. `apiProcessesNotified` is how
 * many processes the broadcast reached.
 */
export async function revokeAccountKey(
  deps: { db: Db; keyCache: KeyCache; evictionBus?: EvictionBus },
  args: { accountId: string; keyId: string },
): Promise<{ keyId: string; revokedAt: string; apiProcessesNotified: number }> {
  await requireAccount(deps.db, args.accountId);
  const revoked = await revokeKey(deps.db, args.keyId, { accountId: args.accountId });
  if (!revoked) throw new AppError('NOT_FOUND', `No key ${args.keyId} for user ${args.accountId}`);
  const apiProcessesNotified = await evictEverywhere(deps.keyCache, deps.evictionBus, { keyHash: revoked.keyHash });
  return { keyId: args.keyId, revokedAt: revoked.revokedAt, apiProcessesNotified };
}
