import { spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '../../core/config.ts';
import { RateLimiter } from '../../ratelimit/limiter.ts';
import { POLICIES } from '../../ratelimit/policy.ts';
import { generateInternalSecret } from '../../tools/scripts/internal-secret.ts';
import { freePort } from '../../tools/scripts/temporal.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, INTERNAL_SECRET, type TestApp } from '../helpers/app.ts';
import { serviceEnv } from '../helpers/processes.ts';
import { LOADED_MACHINE_REDIS_MS } from '../helpers/deps.ts';

// The real app in-process on the real Redis and Postgres, the limiter's clock in the test's hands.
let now = 1_800_000_000_000;
let limiter: RateLimiter;
let t: TestApp;
beforeAll(async () => {
  limiter = await RateLimiter.connect(testConfig().REDIS_URL, { clock: () => now, commandTimeoutMs: LOADED_MACHINE_REDIS_MS });
  t = await buildTestApp({ deps: { rateLimiter: limiter } });
});
afterAll(async () => {
  await t?.close();
  await limiter?.close();
});

describe('wrong internal secrets are rate limited per IP', () => {
  const evict = (secret: string, remoteAddress: string) =>
    t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': secret }, payload: { userId: 'usr_x' }, remoteAddress });

  it(`after ${POLICIES.internalSecretFailures.limit} wrong secrets in 10 minutes an IP gets 429, even with the right one; other IPs are untouched`, async () => {
    now += 3_600_000;
    const ip = '198.51.100.77';
    for (let i = 0; i < POLICIES.internalSecretFailures.limit; i++) {
      const res = await evict(`wrong-secret-${i}`.padEnd(40, 'x'), ip);
      expect(res.statusCode, `attempt ${i + 1}`).toBe(401);
    }
    const limited = await evict('another-wrong-secret-guess-0000000000000', ip);
    expect(limited.statusCode, limited.body).toBe(429);
    expect(expectEnvelope(limited.json())).toMatchObject({ code: 'RATE_LIMITED', retryable: true });
    expect(Number(limited.headers['retry-after'])).toBe(600);
    // A correct guess from that IP would otherwise be told apart from the wrong ones: also 429.
    expect((await evict(INTERNAL_SECRET, ip)).statusCode).toBe(429);
    // The key-or-internal route counts the same way.
    const usage = await t.app.inject({ method: 'GET', url: '/v1/usage?userId=usr_x', headers: { 'x-internal-secret': 'nope' }, remoteAddress: ip });
    expect(usage.statusCode).toBe(429);
    expect((await evict(INTERNAL_SECRET, '198.51.100.78')).statusCode).toBe(200);
    // The window passes: the IP may try again.
    now += 10 * 60_000 + 1;
    expect((await evict(INTERNAL_SECRET, ip)).statusCode).toBe(200);
  });
});

describe('sandbox keys have their own budget', () => {
  it(`${POLICIES.user.limit} sandbox requests in a minute leave the live key's ${POLICIES.user.limit} untouched`, async () => {
    now += 3_600_000;
    const user = await createTestAccount(t.db);
    for (let i = 0; i < POLICIES.user.limit; i++) {
      const res = await t.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(user.testKey) });
      expect(res.statusCode, `sandbox request ${i + 1}`).toBe(200);
    }
    expect((await t.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(user.testKey) })).statusCode).toBe(429);
    const live = await t.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(user.liveKey) });
    expect(live.statusCode, live.body).toBe(200);
    expect(live.headers['ratelimit-remaining']).toBe(String(POLICIES.user.limit - 1));
  });
});

describe('creating a user and its credit account is one transaction', () => {
  it('when the credit account cannot be created, no user is left behind and the address can sign up again', async () => {
    const address = `tx-fail-${process.pid}-${Date.now()}@example.test`;
    // A real failure of the second insert, only for this address.
    await t.db.query(`CREATE OR REPLACE FUNCTION lenstack_test_refuse_account() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM users WHERE id = NEW.user_id AND email = '${address}') THEN RAISE EXCEPTION 'credit account refused by test'; END IF;
        RETURN NEW;
      END $$`);
    await t.db.query('CREATE TRIGGER lenstack_test_refuse_account BEFORE INSERT ON credit_accounts FOR EACH ROW EXECUTE FUNCTION lenstack_test_refuse_account()');
    const create = () => t.app.inject({ method: 'POST', url: '/v1/internal/accounts', headers: { 'x-internal-secret': INTERNAL_SECRET }, payload: { email: address } });
    try {
      const failed = await create();
      expect(failed.statusCode).toBe(500);
      const users = await t.db.query('SELECT id FROM users WHERE email = $1', [address]);
      expect(users.rowCount).toBe(0);
    } finally {
      await t.db.query('DROP TRIGGER lenstack_test_refuse_account ON credit_accounts');
      await t.db.query('DROP FUNCTION lenstack_test_refuse_account()');
    }
    const again = await create();
    expect(again.statusCode, again.body).toBe(201);
    const account = await t.db.query('SELECT community_balance FROM credit_accounts WHERE user_id = $1', [again.json().userId]);
    expect(account.rowCount).toBe(1);
  });
});

describe('the recording payment gateway runs only when enabled', () => {
  const env = (extra: Record<string, string>) => loadConfig({ ...extra });

  it('is off with NODE_ENV unset, development or test, and on only with PAYMENTS_GATEWAY=recording', () => {
    expect(env({}).PAYMENTS_GATEWAY).toBe('none');
    expect(env({ NODE_ENV: 'development' }).PAYMENTS_GATEWAY).toBe('none');
    expect(env({ PAYMENTS_GATEWAY: 'recording' }).PAYMENTS_GATEWAY).toBe('recording');
    expect(() => env({ PAYMENTS_GATEWAY: 'free' })).toThrow(/PAYMENTS_GATEWAY/);
    expect(() => env({ NODE_ENV: 'production', PAYMENTS_GATEWAY: 'recording' })).toThrow(/PAYMENTS_GATEWAY: recording .* refused with NODE_ENV=production/);
  });

  it('with NODE_ENV left unset, a pack purchase grants nothing', async () => {
    // This run's services, with what an environment that sets neither NODE_ENV nor PAYMENTS_GATEWAY gets.
    const unset = loadConfig({});
    const config = { ...testConfig({ INTERNAL_SECRET }), NODE_ENV: unset.NODE_ENV, PAYMENTS_GATEWAY: unset.PAYMENTS_GATEWAY };
    const app = await buildTestApp({ deps: { config } });
    try {
      const user = await createTestAccount(app.db);
      const res = await app.app.inject({
        method: 'POST',
        url: `/v1/internal/accounts/${user.userId}/purchases`,
        headers: { 'x-internal-secret': INTERNAL_SECRET },
        payload: { pack: 'starter', idempotencyKey: 'free-credits?' },
      });
      expect(res.statusCode, res.body).toBe(503);
      expect(expectEnvelope(res.json()).message).toMatch(/PAYMENTS_GATEWAY/);
      const balance = await app.db.query('SELECT purchased_balance FROM credit_accounts WHERE user_id = $1', [user.userId]);
      expect(Number(balance.rows[0].purchased_balance)).toBe(0);
      const paid = await app.db.query('SELECT count(*)::int AS n FROM recorded_payments WHERE user_id = $1', [user.userId]);
      expect(paid.rows[0].n).toBe(0);
    } finally {
      await app.close();
    }
  });
});

describe('npm start keeps a generated internal secret off the terminal', () => {
  it('writes it to a 0600 file under the data directory and names the file, not the secret', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-secret-'));
    try {
      const { secret, file, message } = generateInternalSecret(dir);
      expect(secret).toMatch(/^[0-9a-f]{64}$/);
      expect(file).toBe(join(dir, 'internal-secret'));
      expect(readFileSync(file, 'utf8').trim()).toBe(secret);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(message).toContain(file);
      expect(message).not.toContain(secret);
      // A second run replaces it, still 0600.
      const second = generateInternalSecret(dir);
      expect(second.secret).not.toBe(secret);
      expect(statSync(file).mode & 0o777).toBe(0o600);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('npm start itself: its terminal output names the file and never shows the secret', async () => {
    // tools/scripts/start.ts as `npm start` runs it, on this run's database, Redis and Temporal, with
    // its own ports; no INTERNAL_SECRET, so it generates one, into a DATA_DIR of this test's own
    // (the checkout's .data/ is the developer's: a test writes nothing there).
    const [port, webPort] = [await freePort(), await freePort()];
    const dataDir = await mkdtemp(join(tmpdir(), 'lenstack-start-data-'));
    onTestFinished(() => rm(dataDir, { recursive: true, force: true }));
    const env = serviceEnv(testConfig(), { PORT: port, WEB_PORT: webPort, AUTH_SECRET: 'a'.repeat(64), DATA_DIR: dataDir });
    delete env.INTERNAL_SECRET;
    delete env.SIM_VENDOR_URL;
    delete env.PAYMENTS_GATEWAY;
    env.LOG_FORMAT = 'pretty';
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const start = spawn(process.execPath, ['--import', 'tsx', 'tools/scripts/start.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    start.stdout.on('data', (d) => (out += d));
    start.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => start.once('exit', (code) => resolve(code)));
    try {
      // Up, or given up (start.ts bounds its own wait for the children; on a loaded machine it may
      // stop there): either way everything it printed is in `out`, the secret's line included.
      await expect.poll(() => /Ctrl-C stops everything|start failed/.test(out) || start.exitCode !== null, { timeout: 150_000, interval: 100 }).toBe(true);
    } finally {
      start.kill('SIGTERM');
      await exited;
    }
    const file = join(dataDir, 'internal-secret');
    const secret = readFileSync(file, 'utf8').trim();
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(out, out.slice(-4000)).toContain(`INTERNAL_SECRET not set: generated one for this run, in ${file}`);
    expect(out).not.toContain(secret);
  }, 200_000);
});
