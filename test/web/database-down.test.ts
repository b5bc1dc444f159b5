import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensurePersonalWorkspace } from '../../accounts/workspaces.ts';
import { KeyCache } from '../../auth/cache.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { PrivatePostgres } from '../../tools/chaos/infra.ts';
import { buildWebApp } from '../../web/app.ts';
import { createConsoleAuth } from '../../web/auth.ts';
import type { Mailer } from '../../web/mail.ts';
import { testConfig } from '../harness/env.ts';
import { noRateLimits } from '../helpers/deps.ts';

/**
 * The console with its Postgres stopped (`pg_ctl -m immediate`, as the chaos suite does): a
 * signed-in person's requests, better-auth's own routes and a password sign-in answer 503 with
 * Retry-After in the error envelope (docs/reliability.md "Chaos"), never a 500, and never a 401
 * for a session that is valid; once Postgres is back the same cookie works. A private cluster:
 * stopping the shared one would break every other file.
 */
let pg: PrivatePostgres;
let db: Db;
let app: FastifyInstance;
const mails: Array<{ to: string; text: string }> = [];
const ORIGIN = 'http://127.0.0.1:5999';
const EMAIL = 'db-down@example.test';
const PASSWORD = 'lantern orbit cactus violin';
let cookie = '';
let workspaceId = '';

beforeAll(async () => {
  pg = await PrivatePostgres.start();
  const url = pg.url('lenstack_web_dbdown');
  await createDatabaseIfMissing(url);
  await migrate(url);
  const config = testConfig({ DATABASE_URL: url, WEB_URL: ORIGIN, AUTH_SECRET: 'db-down-test-secret-0123456789abcdef0123456789' });
  db = createPool(url, { application: 'web-dbdown-test' });
  const mailer: Mailer = { send: async (m) => void mails.push({ to: String(m.to), text: m.text }) };
  const auth = createConsoleAuth({ config, pool: db, mailer, onEmailVerified: async (user) => void (await ensurePersonalWorkspace(db, { id: user.id, email: user.email })) });
  app = await buildWebApp({ config, db, auth, mailer, keyCache: new KeyCache(), limiter: noRateLimits, logger: false });
  const headers = { origin: ORIGIN, 'content-type': 'application/json' };
  const up = await app.inject({ method: 'POST', url: '/api/v1/auth/sign-up/email', headers, payload: { name: 'Down', email: EMAIL, password: PASSWORD } });
  expect(up.statusCode, up.body).toBe(200);
  const link = new URL(/https?:\/\/\S+/.exec(mails.find((m) => m.to.includes(EMAIL))!.text)![0]);
  await app.inject({ method: 'GET', url: link.pathname + link.search });
  const signIn = await app.inject({ method: 'POST', url: '/api/v1/auth/sign-in/email', headers, payload: { email: EMAIL, password: PASSWORD } });
  expect(signIn.statusCode, signIn.body).toBe(200);
  const setCookie = signIn.headers['set-cookie'];
  cookie = (Array.isArray(setCookie) ? setCookie : [setCookie!]).map((c) => c.split(';')[0]!).join('; ');
  const session = await app.inject({ method: 'GET', url: '/api/v1/session', headers: { cookie } });
  expect(session.statusCode, session.body).toBe(200);
  workspaceId = (session.json() as { workspaces: Array<{ id: string }> }).workspaces[0]!.id;
}, 180_000);

afterAll(async () => {
  await app?.close();
  await db?.end();
  await pg?.close();
});

describe('console with Postgres down', () => {
  it('answers 503 with Retry-After, not 500 or 401, and serves the same session once it is back', async () => {
    await pg.stopImmediate();
    const requests = [
      { method: 'GET' as const, url: '/api/v1/session', headers: { cookie } },
      { method: 'GET' as const, url: `/api/v1/workspaces/${workspaceId}/credits`, headers: { cookie } },
      { method: 'GET' as const, url: '/api/v1/account/security', headers: { cookie } },
      { method: 'GET' as const, url: '/api/v1/auth/get-session', headers: { cookie } },
      { method: 'POST' as const, url: '/api/v1/auth/sign-in/email', headers: { origin: ORIGIN, 'content-type': 'application/json' }, payload: { email: EMAIL, password: PASSWORD } },
    ];
    const seen: string[] = [];
    for (const r of requests) {
      const res = await app.inject(r);
      seen.push(`${r.method} ${r.url} ${res.statusCode} retry-after=${String(res.headers['retry-after'])} ${res.body.slice(0, 120)}`);
    }
    // Every one: 503 SERVICE_UNAVAILABLE, retryable, with Retry-After.
    expect(seen.filter((l) => !/ 503 retry-after=\d+ .*SERVICE_UNAVAILABLE/.test(l))).toEqual([]);

    await pg.restart();
    const again = await app.inject({ method: 'GET', url: '/api/v1/session', headers: { cookie } });
    expect(again.statusCode, again.body).toBe(200);
  }, 120_000);
});

describe('a connection lost under a checked-out client', () => {
  it('does not end the process: the next query fails as unavailable and the pool replaces the client', async () => {
    // What better-auth's Kysely does for a transaction: pool.connect(), queries, release; no
    // 'error' listener of its own. The backend is terminated between two of its queries.
    const client = await db.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const admin = createPool(pg.url('lenstack_web_dbdown'), { max: 1, application: 'web-dbdown-admin' });
    try {
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      // The terminated backend's FATAL reaches the idle client as an 'error' event (before: unhandled).
      await new Promise((r) => setTimeout(r, 500));
      const failed = await client.query('SELECT 1').then(
        () => null,
        (err: unknown) => err,
      );
      expect(isDatabaseUnavailable(failed)).toBe(true);
      client.release();
      const again = await db.query<{ one: number }>('SELECT 1 AS one');
      expect(again.rows[0]!.one).toBe(1);
    } finally {
      await admin.end();
    }
  }, 60_000);
});
