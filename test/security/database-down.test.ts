import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { PrivatePostgres } from '../../tools/chaos/infra.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp } from '../helpers/app.ts';

/**
 * Postgres stopped (`pg_ctl -m immediate`, as the chaos suite does) while the API runs: before,
 * every request that touched the database answered a bare 500 INTERNAL_ERROR. Now 503
 * SERVICE_UNAVAILABLE with Retry-After, in the envelope; once Postgres is back the same key works.
 * A private cluster: stopping the shared one would break every other file.
 */
let pg: PrivatePostgres;
let t: TestApp;

beforeAll(async () => {
  pg = await PrivatePostgres.start();
  const url = pg.url('lenstack_dbdown');
  await createDatabaseIfMissing(url);
  await migrate(url);
  t = await buildTestApp({ config: { DATABASE_URL: url } });
}, 180_000);
afterAll(async () => {
  await t?.close();
  await pg?.close();
});

describe('Postgres down', () => {
  it('answers 503 with Retry-After while it is down, and serves again once it is back', async () => {
    const user = await createTestAccount(t.db, { community: 5 });
    await pg.stopImmediate();
    // A key the process has not cached: authentication needs the database.
    const res = await t.app.inject({ method: 'GET', url: '/v1/modules', headers: { ...bearer(user.liveKey), 'x-request-id': 'db-down-1' } });
    expect(res.statusCode, res.body).toBe(503);
    const err = expectEnvelope(res.json());
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, requestId: 'db-down-1' });
    expect(err.message).toMatch(/database is unreachable/);
    expect(res.headers['retry-after']).toBe('2');

    const analyze = await t.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageUrl: 'https://example.com/a.jpg' } });
    expect(analyze.statusCode, analyze.body).toBe(503);

    await pg.restart();
    const again = await t.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(user.liveKey) });
    expect(again.statusCode, again.body).toBe(200);
    expect(await getBalance(t.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
  }, 120_000);

  it('tells a lost connection from a query the database refused', () => {
    expect(isDatabaseUnavailable(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5'), { code: 'ECONNREFUSED', syscall: 'connect' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('the database system is starting up'), { code: '57P03' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('wrapped', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' }) }))).toBe(true);
    // A refused query, a constraint, a plain error: not an outage (they stay 500 / their own code).
    expect(isDatabaseUnavailable(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('syntax error'), { code: '42601' }))).toBe(false);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('no syscall'), { code: 'ECONNRESET' }))).toBe(false);
  });
});
