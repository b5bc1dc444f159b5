import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp, type TestAccount } from '../helpers/app.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { noRateLimits, unreachableTemporal } from '../helpers/deps.ts';

let t: TestApp;
let user: TestAccount;
beforeAll(async () => {
  t = await buildTestApp();
  user = await createTestAccount(t.db);
});
afterAll(async () => t.close());

describe('every error is the error envelope (docs/contract.md) with a requestId', () => {
  it('validation failure names the field', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/usage?tier=growth', headers: bearer(user.liveKey) });
    expect(res.statusCode).toBe(400);
    const e = expectEnvelope(res.json());
    expect(e).toMatchObject({ code: 'VALIDATION_FAILED', retryable: false });
    expect(e.message).toContain('tier');
    expect(e.requestId).toBe(res.headers['x-request-id']);
  });

  it('unknown route → 404 NOT_FOUND', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/nope' });
    expect(res.statusCode).toBe(404);
    expect(expectEnvelope(res.json()).code).toBe('NOT_FOUND');
  });

  it('malformed JSON → 400 VALIDATION_FAILED', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/internal/evict',
      headers: { 'content-type': 'application/json', 'x-internal-secret': 'test-internal-secret-0123456789abcdef0123456789' },
      payload: '{"userId": ',
    });
    expect(res.statusCode).toBe(400);
    expect(expectEnvelope(res.json()).code).toBe('VALIDATION_FAILED');
  });

  it('wrong content type → 415 UNSUPPORTED_MEDIA_TYPE', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/internal/evict',
      headers: { 'content-type': 'application/xml', 'x-internal-secret': 'test-internal-secret-0123456789abcdef0123456789' },
      payload: '<userId>u</userId>',
    });
    expect(res.statusCode).toBe(415);
    expect(expectEnvelope(res.json()).code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it('body too large → 413 PAYLOAD_TOO_LARGE', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/internal/evict',
      headers: { 'content-type': 'application/json', 'x-internal-secret': 'test-internal-secret-0123456789abcdef0123456789' },
      payload: JSON.stringify({ userId: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(res.statusCode).toBe(413);
    expect(expectEnvelope(res.json()).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('auth failure → 401 AUTH_FAILED, not retryable', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/modules' });
    expect(res.statusCode).toBe(401);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'AUTH_FAILED', retryable: false });
  });

  it('honours a safe incoming x-request-id and replaces an unsafe one', async () => {
    const mine = await t.app.inject({ method: 'GET', url: '/v1/health', headers: { 'x-request-id': 'client-req-42' } });
    expect(mine.headers['x-request-id']).toBe('client-req-42');
    const err = await t.app.inject({ method: 'GET', url: '/v1/missing', headers: { 'x-request-id': 'client-req-43' } });
    expect(expectEnvelope(err.json()).requestId).toBe('client-req-43');
    const unsafe = await t.app.inject({ method: 'GET', url: '/v1/health', headers: { 'x-request-id': 'bad id\twith spaces' } });
    expect(unsafe.headers['x-request-id']).toMatch(/^req_[0-9a-f]{24}$/);
  });
});

describe('internal faults', () => {
  it('→ 500 INTERNAL_ERROR, retryable, without the message or stack of the fault', async () => {
    const f = await buildTestApp();
    try {
      // Registered before ready() is impossible on a ready app, so build a second one and add a failing route.
      await f.app.close();
      const { buildApp } = await import('../../api/app.ts');
      const app = await buildApp({ fetchPolicy: PUBLIC_INTERNET, config: f.config, db: f.db, keyCache: f.keyCache, blobs: null as never, temporal: unreachableTemporal(), rateLimiter: noRateLimits, metrics: createApiMetrics() });
      app.get('/v1/boom', { config: { auth: 'none' } }, async () => {
        throw new Error('secret database password in a stack');
      });
      await app.ready();
      const res = await app.inject({ method: 'GET', url: '/v1/boom' });
      expect(res.statusCode).toBe(500);
      const e = expectEnvelope(res.json());
      expect(e).toMatchObject({ code: 'INTERNAL_ERROR', retryable: true, message: 'Internal server error' });
      expect(res.body).not.toContain('secret');
      expect(res.body).not.toContain('at ');
      await app.close();
    } finally {
      await f.db.end();
    }
  });
});
