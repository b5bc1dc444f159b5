import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount, expectEnvelope, INTERNAL_SECRET, type TestAccount } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

const run = promisify(execFile);
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());
beforeEach(() => p.sim.reset());

const analyze = (key: string, body: Record<string, unknown>) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: body });
const usage = async (user: TestAccount) => (await p.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(user.liveKey) })).json();

let series = 0;
/**
 * `n` small PNGs, all different (a grey square with one pixel coloured by its index), so every
 * one is a new photo: no cache hit, 1 credit per billable lens.
 */
async function distinctImages(n: number): Promise<string[]> {
  const seed = series++;
  const size = 24;
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const raw = Buffer.alloc(size * size * 3, 0x80 + seed);
      const at = (i % (size * size)) * 3;
      raw[at] = 0xff;
      raw[at + 1] = i & 0xff;
      raw[at + 2] = (i >> 8) & 0xff;
      return (await sharp(raw, { raw: { width: size, height: size, channels: 3 } }).png().toBuffer()).toString('base64');
    }),
  );
}

describe('credits around analyze', () => {
  it('GET /v1/usage shows the credits held by an in-flight analyze, taken community first, and reserved 0 once it settles', async () => {
    const user = await createTestAccount(p.db, { community: 2, purchased: 10 });
    p.sim.setBehaviour('all', { latencyMs: 3000 });
    const [img] = await distinctImages(1);
    const inflight = analyze(user.liveKey, { imageBase64: img, modules: ['describe', 'dating', 'people'] });

    await expect.poll(async () => (await usage(user)).reserved, { timeout: 20_000, interval: 50 }).toBe(3);
    expect(await usage(user)).toEqual({
      tier: 'starter',
      community: { balance: 0, monthlyAllowance: 0, resetsInDays: 0 },
      purchased: { balance: 9 },
      reserved: 3,
    });
    // The internal path reports the same hold.
    const internal = await p.app.inject({ method: 'GET', url: `/v1/usage?userId=${user.userId}`, headers: { 'x-internal-secret': INTERNAL_SECRET } });
    expect(internal.json()).toMatchObject({ reserved: 3, purchased: { balance: 9 } });

    const res = await inflight;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().usage.creditsCharged).toBe(3);
    expect(await usage(user)).toEqual({
      tier: 'starter',
      community: { balance: 0, monthlyAllowance: 0, resetsInDays: 0 },
      purchased: { balance: 9 },
      reserved: 0,
    });
  }, 60_000);

  it('200 concurrent 1-credit analyze calls against a balance of 50: exactly 50 succeed, 150 get 402, the balance ends at 0 and the ledger checks', async () => {
    const CALLS = 200;
    const BALANCE = 50;
    const user = await createTestAccount(p.db, { community: 20, purchased: 30 });
    const images = await distinctImages(CALLS);
    expect(new Set(images).size).toBe(CALLS);
    // Vendor answers take 5 s, so the winners still hold their credits while the rest race for them.
    p.sim.setBehaviour('all', { latencyMs: 5000 });

    // All 200 at once, no client-side bound. Each is a careful client: the database's 503 (on a
    // loaded machine, 200 requests queue for one process's 10 connections past the pool's wait) is
    // sent again under the same x-request-id after its Retry-After, as the contract says. Any other
    // 503 is an answer, and fails the count below.
    let resent = 0;
    const results = await Promise.all(
      images.map(async (img, i) => {
        const headers = { ...bearer(user.liveKey), 'x-request-id': `billing-race-${user.userId}-${i}` };
        for (let attempt = 0; ; attempt++) {
          const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers, payload: { imageBase64: img, modules: ['describe'] } });
          if (res.statusCode !== 503 || !res.body.includes('The database is unreachable') || attempt === 10) return res;
          resent++;
          await new Promise((r) => setTimeout(r, Math.min(5, Number(res.headers['retry-after'] ?? 1)) * 1000));
        }
      }),
    );

    const ok = results.filter((r) => r.statusCode === 200);
    const refused = results.filter((r) => r.statusCode === 402);
    const other = results.filter((r) => r.statusCode !== 200 && r.statusCode !== 402).map((r) => `${r.statusCode} ${r.body.slice(0, 300)}`);
    expect({ ok: ok.length, refused: refused.length, other: other.slice(0, 3) }, `${resent} database 503s sent again`).toEqual({ ok: BALANCE, refused: CALLS - BALANCE, other: [] });
    for (const r of ok) expect(r.json().usage.creditsCharged).toBe(1);
    for (const r of refused) {
      const e = expectEnvelope(r.json());
      expect(e.code).toBe('PLAN_LIMIT_EXCEEDED');
      expect(e.credits).toEqual({ needed: 1, community: 0, purchased: 0, total: 0, resetsInDays: 0 });
      expect(r.headers['cache-control']).toBe('no-store, private');
    }

    expect(await getBalance(p.db, user.userId)).toEqual({ community: 0, purchased: 0, reserved: 0, referralBonus: 0 });
    const charged = await p.db.query('SELECT charged FROM credit_accounts WHERE user_id = $1', [user.userId]);
    expect(charged.rows[0].charged).toBe(BALANCE);
    const reservations = await p.db.query(
      `SELECT status, count(*)::int AS n, sum(settled_amount)::int AS charged FROM reservations WHERE user_id = $1 GROUP BY status`,
      [user.userId],
    );
    expect(reservations.rows).toEqual([{ status: 'settled', n: BALANCE, charged: BALANCE }]);
    // How many winners held their credit at the same moment (all 50 in our runs): the calls raced, they were not queued.
    const overlap = await p.db.query(
      `SELECT max(open)::int AS peak FROM (
         SELECT sum(d) OVER (ORDER BY t, d) AS open FROM (
           SELECT created_at AS t, 1 AS d FROM reservations WHERE user_id = $1
           UNION ALL SELECT closed_at, -1 FROM reservations WHERE user_id = $1) e) s`,
      [user.userId],
    );
    expect(overlap.rows[0].peak).toBeGreaterThanOrEqual(BALANCE / 2);
    const photos = await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId]);
    expect(photos.rows[0].n).toBe(BALANCE);

    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
    const env = { ...process.env, DATABASE_URL: p.config.DATABASE_URL, REDIS_URL: p.config.REDIS_URL, REDIS_PREFIX: p.config.REDIS_PREFIX };
    const cli = await run(process.execPath, ['--import', 'tsx', 'tools/scripts/admin.ts', 'ledger', 'check'], { env });
    const report = JSON.parse(cli.stdout.trim());
    expect(report.ok).toBe(true);
    expect(report.usersChecked).toBeGreaterThanOrEqual(1);
  }, 300_000);
});
