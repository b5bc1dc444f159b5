import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyCache, KEY_CACHE_TTL_MS } from '../../auth/cache.ts';
import { internalSecretMatches } from '../../auth/authenticate.ts';
import { ANONYMOUS_SANDBOX_KEY, generateKey, hashKey, KEY_PATTERN } from '../../auth/keys.ts';
import { issueKey, revokeKey } from '../../auth/repository.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, INTERNAL_SECRET, type TestApp } from '../helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => t.close());

describe('API keys', () => {
  it('are high-entropy, well-formed and distinct', () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateKey('live')));
    expect(keys.size).toBe(200);
    for (const k of keys) expect(k).toMatch(KEY_PATTERN);
    expect(generateKey('test').startsWith('svc_test_')).toBe(true);
  });

  it('are stored only as SHA-256: no table holds a plaintext key', async () => {
    const user = await createTestAccount(t.db, { community: 10 });
    const cols = await t.db.query<{ table_name: string; column_name: string }>(
      `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb')`,
    );
    const secretPart = user.liveKey.slice('svc_live_'.length);
    for (const { table_name, column_name } of cols.rows) {
      const hit = await t.db.query(`SELECT 1 FROM ${table_name} WHERE ${column_name}::text LIKE $1 LIMIT 1`, [`%${secretPart}%`]);
      expect(hit.rowCount, `${table_name}.${column_name} holds the key`).toBe(0);
    }
    const stored = await t.db.query('SELECT key_hash, last4 FROM api_keys WHERE user_id = $1 AND kind = $2', [user.userId, 'live']);
    expect(stored.rows[0]).toEqual({ key_hash: hashKey(user.liveKey), last4: user.liveKey.slice(-4) });
  });

  it('authenticate a request; missing, malformed, unknown and revoked keys get 401 AUTH_FAILED', async () => {
    const user = await createTestAccount(t.db);
    const ok = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(user.liveKey) });
    expect(ok.statusCode).toBe(200);

    const cases: Array<Record<string, string>> = [
      {},
      { authorization: 'Basic abc' },
      { authorization: `Bearer ${user.liveKey}x` },
      { authorization: 'Bearer svc_live_short' },
      { authorization: `Bearer ${generateKey('live')}` },
    ];
    for (const headers of cases) {
      const res = await t.app.inject({ method: 'GET', url: '/v1/usage', headers });
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(expectEnvelope(res.json()).code).toBe('AUTH_FAILED');
    }

    const extra = await issueKey(t.db, user.userId, 'live');
    await revokeKey(t.db, extra.keyId);
    const revoked = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(extra.key) });
    expect(revoked.statusCode).toBe(401);
    expect(expectEnvelope(revoked.json()).message).toMatch(/revoked/);
  });

  it('the public anonymous sandbox key is accepted and reports an empty balance', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(ANONYMOUS_SANDBOX_KEY) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ tier: 'starter', community: { balance: 0, monthlyAllowance: 0, resetsInDays: 0 }, purchased: { balance: 0 }, reserved: 0 });
  });
});

describe('key cache', () => {
  it('keeps an entry 5 minutes, then forgets it', () => {
    let now = 1_000_000;
    const cache = new KeyCache(KEY_CACHE_TTL_MS, () => now);
    const record = { id: 'k', keyHash: 'h', accountId: 'u', kind: 'live' as const, revoked: false };
    cache.set(record);
    now += KEY_CACHE_TTL_MS - 1;
    expect(cache.get('h')).toEqual(record);
    now += 1;
    expect(cache.get('h')).toBeUndefined();
    expect(KEY_CACHE_TTL_MS).toBe(300_000);
  });

  it('serves a revoked key until evicted by keyHash, then refuses it', async () => {
    const user = await createTestAccount(t.db);
    const k = await issueKey(t.db, user.userId, 'live');
    expect((await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(k.key) })).statusCode).toBe(200);
    await revokeKey(t.db, k.keyId);
    // Still cached: the TTL is what bounds staleness without an eviction.
    expect((await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(k.key) })).statusCode).toBe(200);
    const ev = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET }, payload: { keyHash: k.keyHash } });
    expect(ev.statusCode).toBe(200);
    expect(ev.json()).toEqual({ ok: true });
    expect((await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(k.key) })).statusCode).toBe(401);
  });

  it('evicts every key of a user by userId', async () => {
    const user = await createTestAccount(t.db);
    await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(user.liveKey) });
    await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(user.testKey) });
    expect(t.keyCache.get(hashKey(user.liveKey))).toBeDefined();
    expect(t.keyCache.get(hashKey(user.testKey))).toBeDefined();
    const ev = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET }, payload: { userId: user.userId } });
    expect(ev.statusCode).toBe(200);
    expect(t.keyCache.get(hashKey(user.liveKey))).toBeUndefined();
    expect(t.keyCache.get(hashKey(user.testKey))).toBeUndefined();
  });
});

describe('POST /v1/internal/evict', () => {
  it('401 without or with a wrong secret; 400 with neither or both fields', async () => {
    const none = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', payload: { userId: 'u' } });
    expect(none.statusCode).toBe(401);
    const wrong = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET + 'x' }, payload: { userId: 'u' } });
    expect(wrong.statusCode).toBe(401);
    expect(expectEnvelope(wrong.json()).code).toBe('AUTH_FAILED');
    const neither = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET }, payload: {} });
    expect(neither.statusCode).toBe(400);
    const both = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET }, payload: { userId: 'u', keyHash: 'a'.repeat(64) } });
    expect(both.statusCode).toBe(400);
    expect(expectEnvelope(both.json()).code).toBe('VALIDATION_FAILED');
    const badHash = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET }, payload: { keyHash: 'XYZ' } });
    expect(badHash.statusCode).toBe(400);
  });

  it('compares the secret exactly (length and content), and refuses when none is configured', () => {
    expect(internalSecretMatches('abc', 'abc')).toBe(true);
    expect(internalSecretMatches('abd', 'abc')).toBe(false);
    expect(internalSecretMatches('abcd', 'abc')).toBe(false);
    expect(internalSecretMatches('', 'abc')).toBe(false);
    expect(internalSecretMatches(undefined, 'abc')).toBe(false);
    expect(internalSecretMatches('abc', undefined)).toBe(false);
  });
});
