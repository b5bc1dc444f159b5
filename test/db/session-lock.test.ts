import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toAppError } from '../../api/plugins/errors.ts';
import { AppError } from '../../core/errors.ts';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { trySessionLock } from '../../db/session-lock.ts';
import { testConfig } from '../harness/env.ts';

/**
 * The advisory lock a console submission holds while it runs (db/session-lock.ts; docs/decisions.md,
 * "Console batches: one request id, one batch"), against the real Postgres.
 */
const url = testConfig().DATABASE_URL;
let admin: pg.Client;
beforeAll(async () => {
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});
afterAll(async () => admin?.end());

const lockName = () => `test-lock:${randomBytes(6).toString('hex')}`;
const holders = async (name: string) =>
  (await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`,
    [name],
  )).rows.map((r) => r.pid);

describe('a session lock', () => {
  it('is held by one session at a time, and free again once released', async () => {
    const name = lockName();
    const first = await trySessionLock(url, name);
    expect(first).not.toBeNull();
    expect(await holders(name)).toHaveLength(1);
    expect(await trySessionLock(url, name)).toBeNull();
    // Another name is another lock.
    const other = await trySessionLock(url, lockName());
    expect(other).not.toBeNull();
    await other!.release();
    await first!.release();
    expect(await holders(name)).toEqual([]);
    const again = await trySessionLock(url, name);
    expect(again).not.toBeNull();
    await again!.release();
  });

  it('is given up when its session ends from the server side, and its holder learns it was lost', async () => {
    const name = lockName();
    const held = (await trySessionLock(url, name))!;
    const [pid] = await holders(name);
    expect(held.lost).toBe(false);
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    await expect.poll(() => held.lost, { timeout: 5_000, interval: 20 }).toBe(true);
    const next = await trySessionLock(url, name);
    expect(next).not.toBeNull();
    await next!.release();
    await held.release();
  });

  it('answers 503 with Retry-After when the database cannot be reached, never a 500', async () => {
    const unreachable = new URL(url);
    unreachable.port = '1';
    const err = await trySessionLock(unreachable.toString(), lockName()).catch((e: unknown) => e);
    // As the API and the console answer it (their error handling maps it).
    const answered = toAppError(err);
    expect(answered).toBeInstanceOf(AppError);
    expect(answered).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '2' } });
  });

  it('a lone connection\'s connect timeout counts as the database being away', () => {
    expect(isDatabaseUnavailable(new Error('timeout expired'))).toBe(true);
  });
});
