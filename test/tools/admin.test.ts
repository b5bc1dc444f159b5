import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { hashKey } from '../../auth/keys.ts';
import { bearer, buildTestApp, type TestApp } from '../helpers/app.ts';

const run = promisify(execFile);
let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp({ withEvictionBus: true });
});
afterAll(async () => t.close());

async function admin(...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  const env = { ...process.env, DATABASE_URL: t.config.DATABASE_URL, REDIS_URL: t.config.REDIS_URL, REDIS_PREFIX: t.config.REDIS_PREFIX };
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'tools/scripts/admin.ts', ...args], { env });
    return { code: 0, json: stdout.trim() ? JSON.parse(stdout.trim().split('\n').pop()!) : null, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, json: e.stdout?.trim() ? JSON.parse(e.stdout.trim().split('\n').pop()!) : null, stderr: e.stderr };
  }
}

describe('admin CLI', () => {
  it('creates a user with working keys, grants credits, lists and revokes keys, checks the ledger', async () => {
    const created = await admin('user', 'create', '--email', `admin-${Date.now()}@example.test`);
    expect(created.code).toBe(0);
    const { userId: accountId, liveKey, testKey } = created.json;
    expect(accountId).toMatch(/^usr_/);
    expect(liveKey).toMatch(/^svc_live_/);
    expect(testKey).toMatch(/^svc_test_/);

    const granted = await admin('credits', 'grant', '--user', accountId, '--pool', 'purchased', '--amount', '250', '--idempotency-key', 'pack-1');
    expect(granted.json).toMatchObject({ applied: true, amount: 250 });
    const again = await admin('credits', 'grant', '--user', accountId, '--pool', 'purchased', '--amount', '250', '--idempotency-key', 'pack-1');
    expect(again.json).toMatchObject({ applied: false });

    const usage = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(liveKey) });
    expect(usage.statusCode).toBe(200);
    expect(usage.json().purchased.balance).toBe(250);

    const listed = await admin('key', 'list', '--user', accountId);
    expect(listed.json).toHaveLength(2);
    expect(JSON.stringify(listed.json)).not.toContain(liveKey.slice(9));
    const liveId = listed.json.find((k: { kind: string }) => k.kind === 'live').id;

    // The key is cached by the app; revoking must evict it through Redis, not the TTL. The bus
    // empties the cache whenever its heartbeat is late (a loaded machine stalls this process), so
    // what is asserted is the eviction that arrived for this key, not an entry's survival.
    await expect.poll(async () => {
      await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(liveKey) });
      return t.keyCache.get(hashKey(liveKey));
    }, { timeout: 10_000, interval: 50 }).toBeDefined();
    const evicted = vi.spyOn(t.keyCache, 'evictKey');
    const revoked = await admin('key', 'revoke', '--key-id', liveId);
    expect(revoked.json).toMatchObject({ revoked: true });
    expect(revoked.json.apiProcessesNotified).toBeGreaterThanOrEqual(1);
    await expect.poll(() => evicted.mock.calls.some(([h]) => h === hashKey(liveKey)), { timeout: 5000, interval: 20 }).toBe(true);
    evicted.mockRestore();
    expect(t.keyCache.get(hashKey(liveKey))).toBeUndefined();
    const refused = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(liveKey) });
    expect(refused.statusCode).toBe(401);

    const issued = await admin('key', 'issue', '--user', accountId, '--kind', 'live');
    expect(issued.json.key).toMatch(/^svc_live_/);
    expect((await t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(issued.json.key) })).statusCode).toBe(200);

    const check = await admin('ledger', 'check', '--user', accountId);
    expect(check.code).toBe(0);
    expect(check.json).toMatchObject({ usersChecked: 1, ok: true });
  }, 120_000); // seven CLI runs, each a fresh Node process with tsx: slow on a busy 2-core machine

  it('refuses bad input with a usage message and exit code 2', async () => {
    const bad = await admin('credits', 'grant', '--user', 'usr_nobody', '--pool', 'purchased', '--amount', '5');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('no user');
    const unknown = await admin('frobnicate');
    expect(unknown.code).toBe(2);
  });
});
