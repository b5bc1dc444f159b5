import { createHash, timingSafeEqual } from 'node:crypto';
import { authFailed } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import type { KeyCache } from './cache.ts';
import { ANONYMOUS_SANDBOX_KEY, hashKey, keyKind, type KeyKind } from './keys.ts';
import { findKeyByHash } from './repository.ts';

export interface Principal {
  keyId: string;
  keyHash: string;
  /** null only for the anonymous sandbox key. */
  accountId: string | null;
  kind: KeyKind;
  sandbox: boolean;
  anonymous: boolean;
}

const ANONYMOUS: Principal = {
  keyId: 'key_anonymous_sandbox',
  keyHash: hashKey(ANONYMOUS_SANDBOX_KEY),
  accountId: null,
  kind: 'test',
  sandbox: true,
  anonymous: true,
};

/** The key of an `Authorization: Bearer <key>` header, or undefined when the header is absent or not of that form. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return authorization === undefined ? undefined : /^Bearer[ ]+(\S+)\s*$/i.exec(authorization)?.[1];
}

/** Resolve `Authorization: Bearer <key>` to a principal, or throw 401 AUTH_FAILED. */
export async function authenticate(
  authorization: string | undefined,
  deps: { db: Db; cache: KeyCache },
): Promise<Principal> {
  if (!authorization) throw authFailed('Missing Authorization header (expected "Bearer <API key>")');
  const key = bearerToken(authorization);
  if (key === undefined) throw authFailed('Malformed Authorization header (expected "Bearer <API key>")');
  if (key === ANONYMOUS_SANDBOX_KEY) return ANONYMOUS;
  if (!keyKind(key)) throw authFailed('Invalid API key');
  const keyHash = hashKey(key);
  let record = deps.cache.get(keyHash);
  if (!record) {
    // Read before the query: an eviction landing while it runs keeps this row out of the cache.
    const epoch = deps.cache.epoch;
    const found = await findKeyByHash(deps.db, keyHash);
    if (!found) throw authFailed('Invalid API key');
    record = found;
    if (!record.revoked) deps.cache.set(record, epoch);
  }
  if (record.revoked) throw authFailed('API key has been revoked');
  return {
    keyId: record.id,
    keyHash,
    accountId: record.accountId,
    kind: record.kind,
    sandbox: record.kind === 'test',
    anonymous: record.accountId === null,
  };
}

/**
 * Constant-time comparison of the internal secret: both sides are hashed to fixed-length
 * digests first, so neither the content nor the length leaks through timing.
 */
export function internalSecretMatches(provided: string | undefined, expected: string | undefined): boolean {
  if (!expected || provided === undefined) return false;
  const a = createHash('sha256').update(provided).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
