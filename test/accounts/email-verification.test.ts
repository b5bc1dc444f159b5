import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createEmailVerification,
  EMAIL_VERIFICATION_TTL_MS,
  VERIFICATION_TOKEN_PATTERN,
  verifyEmail,
} from '../../accounts/email-verification.ts';
import { getAccount } from '../../accounts/users.ts';
import { AppError } from '../../core/errors.ts';
import { getBalance } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount } from '../helpers/app.ts';

let db: Db;
beforeAll(() => {
  db = createPool(testConfig().DATABASE_URL, { max: 20 });
});
afterAll(async () => db.end());

const refusal = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => (e instanceof AppError ? `${e.code}: ${e.message}` : String(e)));

describe('e-mail verification tokens', () => {
  it('are random, stored only as SHA-256, and verify the address once, granting 1,000 community credits', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const a = await createEmailVerification(db, { accountId });
    const b = await createEmailVerification(db, { accountId });
    expect(a.token).toMatch(VERIFICATION_TOKEN_PATTERN);
    expect(a.token).not.toBe(b.token);
    const stored = await db.query('SELECT token_hash FROM email_verification_tokens WHERE user_id = $1', [accountId]);
    expect(stored.rows).toHaveLength(2);
    const all = JSON.stringify(stored.rows);
    expect(all).not.toContain(a.token.slice(4));
    expect(all).not.toContain(b.token.slice(4));

    const done = await verifyEmail(db, { token: a.token });
    expect(done).toMatchObject({ userId: accountId, granted: 1_000 });
    expect((await getAccount(db, accountId)).emailVerifiedAt).toBe(done.emailVerifiedAt);
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1_000 });

    expect(await refusal(verifyEmail(db, { token: a.token }))).toMatch(/^VALIDATION_FAILED: token: this token was already used/);
    // Another outstanding token still works once, but the grant was once ever.
    expect(await verifyEmail(db, { token: b.token })).toMatchObject({ userId: accountId, granted: 0, emailVerifiedAt: done.emailVerifiedAt });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1_000 });
    // A verified address needs no new token.
    expect(await refusal(createEmailVerification(db, { accountId }))).toMatch(/already verified/);
  });

  it('one token used 10 times at once: exactly one use succeeds', async () => {
    const { userId: accountId } = await createTestAccount(db);
    const { token } = await createEmailVerification(db, { accountId });
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => verifyEmail(db, { token })));
    const ok = results.filter((r) => r.status === 'fulfilled');
    expect(ok).toHaveLength(1);
    expect((ok[0] as PromiseFulfilledResult<{ granted: number }>).value.granted).toBe(1_000);
    for (const r of results.filter((x) => x.status === 'rejected')) {
      expect(((r as PromiseRejectedResult).reason as AppError).message).toMatch(/already used/);
    }
    expect(await getBalance(db, accountId)).toMatchObject({ community: 1_000 });
  });

  it('expire 24 hours after they are made (injected clock)', async () => {
    expect(EMAIL_VERIFICATION_TTL_MS).toBe(24 * 60 * 60 * 1000);
    const { userId: accountId } = await createTestAccount(db);
    const t0 = new Date('2026-06-01T12:00:00Z');
    const late = await createEmailVerification(db, { accountId, now: t0 });
    const inTime = await createEmailVerification(db, { accountId, now: t0 });
    expect(late.expiresAt).toBe('2026-06-02T12:00:00.000Z');

    const atExpiry = new Date(t0.getTime() + EMAIL_VERIFICATION_TTL_MS);
    expect(await refusal(verifyEmail(db, { token: late.token, now: atExpiry }))).toMatch(/^VALIDATION_FAILED: token: this token has expired/);
    expect((await getAccount(db, accountId)).emailVerifiedAt).toBeNull();
    expect(await getBalance(db, accountId)).toMatchObject({ community: 0 });

    const justBefore = new Date(atExpiry.getTime() - 1);
    expect(await verifyEmail(db, { token: inTime.token, now: justBefore })).toMatchObject({ granted: 1_000, emailVerifiedAt: justBefore.toISOString() });
    // An expired token stays refused, and stays unused.
    expect(await refusal(verifyEmail(db, { token: late.token, now: atExpiry }))).toMatch(/expired/);
    const rows = await db.query('SELECT used_at IS NOT NULL AS used FROM email_verification_tokens WHERE user_id = $1 ORDER BY expires_at, used_at NULLS FIRST', [accountId]);
    expect(rows.rows.map((r) => r.used).sort()).toEqual([false, true]);
  });

  it('refuse unknown and malformed tokens, and unknown users', async () => {
    expect(await refusal(verifyEmail(db, { token: 'evt_' + 'A'.repeat(43) }))).toMatch(/unknown token/);
    expect(await refusal(verifyEmail(db, { token: 'hello' }))).toMatch(/not a verification token/);
    expect(await refusal(createEmailVerification(db, { accountId: 'usr_nobody' }))).toMatch(/^NOT_FOUND/);
  });
});
