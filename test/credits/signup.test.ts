import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setCardOnFile } from '../../accounts/card-on-file.ts';
import { createEmailVerification, verifyEmail } from '../../accounts/email-verification.ts';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { SIGNUP_GRANTS } from '../../credits/signup.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount } from '../helpers/app.ts';

let db: Db;
beforeAll(() => {
  db = createPool(testConfig().DATABASE_URL, { max: 20 });
});
afterAll(async () => db.end());

const signupRows = async (accountId: string) =>
  (await db.query(`SELECT idempotency_key, community_delta FROM credit_ledger WHERE user_id = $1 AND idempotency_key LIKE 'signup:%' ORDER BY id`, [accountId])).rows;

describe('signup grants', () => {
  it('are 1,000 for a verified e-mail and 4,000 for a card on file, in the community pool', () => {
    expect(SIGNUP_GRANTS.emailVerified.amount).toBe(1_000);
    expect(SIGNUP_GRANTS.cardOnFile.amount).toBe(4_000);
  });

  it('10 concurrent verifications (10 tokens) grant 1,000 once; 10 concurrent card-on-file calls grant 4,000 once', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const tokens = await Promise.all(Array.from({ length: 10 }, () => createEmailVerification(db, { accountId })));
    const verified = await Promise.all(tokens.map(({ token }) => verifyEmail(db, { token })));
    expect(verified.map((v) => v.granted).sort((a, b) => b - a)).toEqual([1_000, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(new Set(verified.map((v) => v.emailVerifiedAt)).size).toBe(1);

    const cards = await Promise.all(Array.from({ length: 10 }, () => setCardOnFile(db, { accountId })));
    expect(cards.map((c) => c.granted).sort((a, b) => b - a)).toEqual([4_000, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(new Set(cards.map((c) => c.cardOnFileAt)).size).toBe(1);

    expect(await getBalance(db, accountId)).toEqual({ community: 5_000, purchased: 0, reserved: 0, referralBonus: 0 });
    expect(await signupRows(accountId)).toEqual([
      { idempotency_key: 'signup:email-verified', community_delta: 1_000 },
      { idempotency_key: 'signup:card-on-file', community_delta: 4_000 },
    ]);
    expect((await checkInvariants(db, accountId))[0]).toMatchObject({ ok: true });
  });

  it('are once ever: the flags stay set with their first time, repeating a step grants nothing', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const first = await setCardOnFile(db, { accountId, now: new Date('2026-06-01T10:00:00Z') });
    expect(first).toEqual({ userId: accountId, cardOnFileAt: '2026-06-01T10:00:00.000Z', granted: 4_000 });
    const again = await setCardOnFile(db, { accountId, now: new Date('2026-07-01T10:00:00Z') });
    expect(again).toEqual({ userId: accountId, cardOnFileAt: '2026-06-01T10:00:00.000Z', granted: 0 });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 4_000 });
  });

  it('a card on file for an unknown user is 404 and grants nothing', async () => {
    await expect(setCardOnFile(db, { accountId: 'usr_nobody' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
