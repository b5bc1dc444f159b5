import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPool, inTransaction, type Db } from '../../db/pool.ts';
import { testConfig } from '../harness/env.ts';

/**
 * A connection lost while a transaction holds its client (a reset, a restarted Postgres, a killed
 * backend) used to be an unhandled 'error' event on the checked-out pg client: the whole process
 * died (found by the chaos suite's fault proxy). Now the transaction rejects and the pool goes on.
 */
let db: Db;
let admin: Db;
const uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);

beforeAll(() => {
  const url = testConfig().DATABASE_URL;
  db = createPool(url, { max: 2 });
  admin = createPool(url, { max: 1 });
});
afterAll(async () => {
  await db.end();
  await admin.end();
});
beforeEach(() => {
  uncaught.length = 0;
  process.on('uncaughtException', onUncaught);
});
afterEach(() => {
  process.removeListener('uncaughtException', onUncaught);
});

const backendPid = async (c: { query: Db['query'] }) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

describe('inTransaction when the connection is lost', () => {
  it('between two queries: rejects, nothing crashes, the next transaction gets a fresh connection', async () => {
    let killed = 0;
    const failed = inTransaction(db, async (c) => {
      killed = await backendPid(c);
      await admin.query('SELECT pg_terminate_backend($1)', [killed]);
      // The server's FATAL and the socket's end arrive while the client sits idle in the transaction.
      await expect.poll(async () => (await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [killed])).rows[0].n).toBe(0);
      await c.query('SELECT 1');
    });
    await expect(failed).rejects.toThrow(/not queryable|terminat/i);
    const next = await inTransaction(db, async (c) => backendPid(c));
    expect(next).not.toBe(killed);
    expect(uncaught).toEqual([]);
  });

  it('during a query: rejects with the connection error and the broken client is not reused', async () => {
    const pids: number[] = [];
    await expect(
      inTransaction(db, async (c) => {
        pids.push(await backendPid(c));
        await c.query('SELECT pg_terminate_backend(pg_backend_pid())');
      }),
    ).rejects.toThrow(/terminat/i);
    for (let i = 0; i < 3; i++) pids.push(await inTransaction(db, async (c) => backendPid(c)));
    expect(pids.slice(1)).not.toContain(pids[0]);
    expect(db.totalCount).toBeLessThanOrEqual(2);
    expect(uncaught).toEqual([]);
  });
});
