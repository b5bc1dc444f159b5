import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueAccountKey, listAccountKeys, revokeAccountKey } from '../../accounts/keys.ts';
import { KEY_CACHE_TTL_MS, KeyCache } from '../../auth/cache.ts';
import { hashKey } from '../../auth/keys.ts';
import { revokeKey } from '../../auth/repository.ts';
import { bearer, buildTestApp, createTestAccount, type TestApp } from '../helpers/app.ts';

let now = Date.parse('2026-06-01T00:00:00Z');
let t: TestApp;
beforeAll(async () => {
  // No eviction bus and a clock we move: what happens when a revocation's broadcast is lost.
  t = await buildTestApp({ keyCache: new KeyCache(KEY_CACHE_TTL_MS, () => now) });
});
afterAll(async () => t.close());

const usage = (key: string) => t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(key) }).then((r) => r.statusCode);

describe('account keys (domain functions)', () => {
  it('issue live and test keys shown once, list prefix and last 4 only, revoke and evict from this process', async () => {
    const { userId: accountId } = await createTestAccount(t.db);
    const live = await issueAccountKey(t.db, { accountId, kind: 'live', name: 'ci' });
    const test = await issueAccountKey(t.db, { accountId, kind: 'test' });
    expect(live.key.startsWith('svc_live_')).toBe(true);
    expect(test.key.startsWith('svc_test_')).toBe(true);
    const listed = await listAccountKeys(t.db, accountId);
    expect(listed.slice(2).map((k) => ({ ...k }))).toEqual([
      { id: live.id, kind: 'live', prefix: 'svc_live_', last4: live.key.slice(-4), name: 'ci', createdAt: live.createdAt, lastUsedAt: null, revokedAt: null },
      { id: test.id, kind: 'test', prefix: 'svc_test_', last4: test.key.slice(-4), name: null, createdAt: test.createdAt, lastUsedAt: null, revokedAt: null },
    ]);
    expect(JSON.stringify(listed)).not.toContain(live.key.slice(9, -4));

    expect(await usage(live.key)).toBe(200);
    expect(t.keyCache.get(hashKey(live.key))).toBeDefined();
    const revoked = await revokeAccountKey({ db: t.db, keyCache: t.keyCache }, { accountId, keyId: live.id });
    expect(revoked).toMatchObject({ keyId: live.id, apiProcessesNotified: 0 });
    expect(t.keyCache.get(hashKey(live.key))).toBeUndefined();
    expect(await usage(live.key)).toBe(401);
    expect(await usage(test.key)).toBe(200);
    const again = await revokeAccountKey({ db: t.db, keyCache: t.keyCache }, { accountId, keyId: live.id });
    expect(again.revokedAt).toBe(revoked.revokedAt);
  });
});

describe('key cache lifetime bounds a lost eviction broadcast', () => {
  it('a key revoked without any broadcast is still served from the cache until 5 minutes after it was cached, then refused', async () => {
    const user = await createTestAccount(t.db);
    expect(await usage(user.liveKey)).toBe(200); // cached now
    const { id: keyId } = (await listAccountKeys(t.db, user.userId)).find((k) => k.kind === 'live')!;
    await revokeKey(t.db, keyId); // in the database only: the broadcast is "lost"
    now += KEY_CACHE_TTL_MS - 1;
    expect(await usage(user.liveKey)).toBe(200);
    now += 1;
    expect(await usage(user.liveKey)).toBe(401);
    // And it never comes back into the cache.
    now += KEY_CACHE_TTL_MS;
    expect(await usage(user.liveKey)).toBe(401);
    expect(t.keyCache.get(hashKey(user.liveKey))).toBeUndefined();
  });
});
