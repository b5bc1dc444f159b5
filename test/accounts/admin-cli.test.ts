import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';

const run = promisify(execFile);
const config = testConfig();
let db: Db;
beforeAll(() => {
  db = createPool(config.DATABASE_URL, { max: 2 });
});
afterAll(async () => db.end());

async function admin(...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  const env = { ...process.env, DATABASE_URL: config.DATABASE_URL, REDIS_URL: config.REDIS_URL, REDIS_PREFIX: config.REDIS_PREFIX };
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'tools/scripts/admin.ts', ...args], { env });
    return { code: 0, json: stdout.trim() ? JSON.parse(stdout.trim()) : null, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, json: e.stdout?.trim() ? JSON.parse(e.stdout.trim()) : null, stderr: e.stderr };
  }
}

describe('admin CLI: accounts and packs', () => {
  it('verifies an e-mail, records a card, buys packs idempotently, shows the user and checks the ledger', async () => {
    const { json: user } = await admin('user', 'create', '--email', `cli-${process.pid}-${Date.now()}@example.test`);
    const accountId: string = user.userId;

    const token = await admin('user', 'email-token', '--user', accountId);
    expect(token.json.token).toMatch(/^evt_/);
    expect(await admin('user', 'verify-email', '--token', token.json.token)).toMatchObject({ code: 0, json: { userId: accountId, granted: 1_000 } });
    const reused = await admin('user', 'verify-email', '--token', token.json.token);
    expect(reused.code).toBe(2);
    expect(reused.stderr).toContain('already used');
    expect(await admin('user', 'card-on-file', '--user', accountId)).toMatchObject({ code: 0, json: { userId: accountId, granted: 4_000 } });

    const packs = await admin('packs', 'list');
    expect(packs.code, packs.stderr).toBe(0);
    expect(packs.json.map((p: { name: string; priceCents: number }) => [p.name, p.priceCents])).toEqual([['starter', 1_000], ['pro', 10_000], ['business', 100_000]]);

    const bought = await admin('credits', 'buy', '--user', accountId, '--pack', 'starter', '--idempotency-key', 'cli-1');
    expect(bought).toMatchObject({ code: 0, json: { status: 'granted', credits: 1_000, bonusCredits: 1_000, amountCents: 1_000 } });
    const retried = await admin('credits', 'buy', '--user', accountId, '--pack', 'starter', '--idempotency-key', 'cli-1');
    expect(retried.json).toEqual(bought.json);
    const badPack = await admin('credits', 'buy', '--user', accountId, '--pack', 'mega');
    expect(badPack.code).toBe(2);
    expect(badPack.stderr).toContain('pack: must be one of starter, pro, business');

    const shown = await admin('user', 'show', '--user', accountId);
    expect(shown.json).toMatchObject({ userId: accountId, packsPurchased: 1, credits: { community: 5_000, purchased: 2_000, reserved: 0 } });
    expect(shown.json.emailVerifiedAt).not.toBeNull();
    expect(shown.json.cardOnFileAt).not.toBeNull();

    const keys = await admin('key', 'issue', '--user', accountId, '--kind', 'test', '--name', 'sandbox');
    expect(keys.json.key).toMatch(/^svc_test_/);
    const named = await db.query('SELECT name FROM api_keys WHERE id = $1', [keys.json.keyId]);
    expect(named.rows).toEqual([{ name: 'sandbox' }]);

    expect(await admin('ledger', 'check', '--user', accountId)).toMatchObject({ code: 0, json: { usersChecked: 1, ok: true } });
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  }, 180_000); // 11 CLI runs, each a fresh Node process with tsx
});
