import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createTestAccount, expectEnvelope, INTERNAL_SECRET, type TestApp, type TestAccount } from '../helpers/app.ts';
import { rawRequest } from './support/raw-http.ts';
import { envelopeOf, type Answer } from './support/report.ts';

/**
 * Found by the OpenAPI request fuzzer: answers that left the error envelope (docs/contract.md), or a 500, for input a
 * client controls. Each case here is the smallest request that showed it.
 *  - Node's HTTP parser refusing a request (bad method, bad header bytes, conflicting lengths,
 *    headers over 16 KB) answered Fastify's own `{"error":"Bad Request",…}` or a bare 431.
 *  - The router refusing a path (bad percent-encoding, a parameter over 100 characters) answered
 *    FST_ERR_BAD_URL / FST_ERR_MAX_PARAM_LENGTH bodies (414).
 *  - An unknown `Expect` value got Node's empty 417.
 *  - A NUL in a user id reached Postgres (500); a NUL or a lone surrogate in any JSON string
 *    reached jsonb or text columns inside the workflow (bespoke schemas: 500 after ~80 s of
 *    retries).
 *  - With the real pipeline behind the fuzzer: live-key moduleOptions nested 10,000+ deep or
 *    megabytes long (even for a lens not requested) went into the workflow input, where
 *    serializing it overflowed the stack or the payload limit: 500 INTERNAL_ERROR.
 */

let t: TestApp;
let port: number;
let user: TestAccount;

beforeAll(async () => {
  t = await buildTestApp();
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
  user = await createTestAccount(t.db, { community: 10 });
}, 60_000);
afterAll(async () => t?.close());

function expectSpecError(a: Answer, status: number, code: string): void {
  expect(a.status, a.body).toBe(status);
  const e = envelopeOf(a);
  if ('problem' in e) throw new Error(e.problem);
  expect(e.envelope.code).toBe(code);
  expect(a.headers['x-request-id']).toBe(e.envelope.requestId);
}

describe('malformed HTTP is answered in the error envelope (docs/contract.md), with a request id', () => {
  const health = (over: Partial<Parameters<typeof rawRequest>[1]>) => rawRequest(port, { method: 'GET', target: '/v1/health', headers: [], ...over });

  it.each([
    ['an invalid method token', { method: 'G@T' }],
    ['a space in a header name', { headers: [['bad header', 'x']] as Array<[string, string]> }],
    ['a NUL byte in a header value', { headers: [['x-nul', 'a\u0000b']] as Array<[string, string]> }],
    ['two different Content-Lengths', { method: 'POST', headers: [['content-length', '2'], ['content-length', '3']] as Array<[string, string]>, body: Buffer.from('{}'), contentLength: false }],
    ['Content-Length with Transfer-Encoding', { method: 'POST', headers: [['content-length', '2'], ['transfer-encoding', 'chunked']] as Array<[string, string]>, body: Buffer.from('{}'), contentLength: false }],
  ])('%s → 400 VALIDATION_FAILED', async (_name, over) => {
    expectSpecError(await health(over), 400, 'VALIDATION_FAILED');
  });

  it('headers over 16 KB → 431 HEADERS_TOO_LARGE', async () => {
    expectSpecError(await health({ headers: [['x-big', 'b'.repeat(20_000)]] }), 431, 'HEADERS_TOO_LARGE');
  });

  it('an unknown Expect value is ignored (RFC 9110 allows it), not an empty 417', async () => {
    const a = await health({ headers: [['expect', 'something-else']] });
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body)).toMatchObject({ status: 'ok' });
  });
});

describe('paths the router refuses are answered in the envelope', () => {
  const internal = { 'x-internal-secret': INTERNAL_SECRET };

  it('bad percent-encoding in a path parameter → 400 VALIDATION_FAILED', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/internal/accounts/%E0%A4%A/keys', headers: internal });
    expect(res.statusCode).toBe(400);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'VALIDATION_FAILED', requestId: res.headers['x-request-id'] });
  });

  it('a path parameter over the router limit → 400 VALIDATION_FAILED, not a bare 414', async () => {
    const res = await t.app.inject({ method: 'GET', url: `/v1/internal/accounts/${'x'.repeat(129)}`, headers: internal });
    expect(res.statusCode).toBe(400);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'VALIDATION_FAILED', requestId: res.headers['x-request-id'] });
  });
});

describe('NUL and unpaired surrogates are refused at the edge, naming the field', () => {
  it.each([
    ['a user id path parameter', { method: 'GET' as const, url: '/v1/internal/accounts/a%00b', headers: { 'x-internal-secret': INTERNAL_SECRET } }, 'params.userId'],
    ['the usage userId query', { method: 'GET' as const, url: '/v1/usage?userId=%00', headers: { 'x-internal-secret': INTERNAL_SECRET } }, 'querystring.userId'],
  ])('%s', async (_name, req, field) => {
    const res = await t.app.inject(req);
    expect(res.statusCode, res.body).toBe(400);
    const e = expectEnvelope(res.json());
    expect(e.code).toBe('VALIDATION_FAILED');
    expect(e.message).toContain(field);
  });

  it.each([
    ['NUL', 'x\u0000y'],
    ['NUL in text with characters above U+00FF (the two-byte path)', '€\u0000'],
    ['a lone high surrogate', 'x\ud800y'],
    ['a lone low surrogate', '\udfff'],
  ])('%s in an extract.schema description (it reached a jsonb column inside the workflow)', async (_name, description) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v2/analyze',
      headers: { authorization: `Bearer ${user.liveKey}` },
      payload: { imageUrl: 'https://example.com/a.jpg', extract: { schema: { type: 'object', properties: { a: { type: 'string', description } } } } },
    });
    expect(res.statusCode, res.body).toBe(400);
    const e = expectEnvelope(res.json());
    expect(e.code).toBe('VALIDATION_FAILED');
    expect(e.message).toContain('body.extract.schema.properties.a.description');
  });

  it('a NUL in an object key is refused too; well-formed astral characters are not', async () => {
    const withKey = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET, 'content-type': 'application/json' }, payload: '{"userId":"u","a\\u0000":1}' });
    expect(withKey.statusCode).toBe(400);
    expect(expectEnvelope(withKey.json()).code).toBe('VALIDATION_FAILED');
    const emoji = await t.app.inject({ method: 'POST', url: '/v1/internal/evict', headers: { 'x-internal-secret': INTERNAL_SECRET }, payload: { userId: 'usr_\u{1F600}' } });
    expect(emoji.statusCode, emoji.body).toBe(200);
  });

  it.each([
    ['nested 10,000 objects deep', `${'{"k":'.repeat(10_000)}1${'}'.repeat(10_000)}`, 'nested deeper than'],
    ['a string of 3,000,000 characters', JSON.stringify('aa'.repeat(1_500_000)), 'larger than'],
  ])('live-key moduleOptions of a lens not requested, %s → 400 (it reached the workflow input: a 500)', async (_name, value, message) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: { authorization: `Bearer ${user.liveKey}`, 'content-type': 'application/json' },
      payload: `{"imageUrl":"https://example.com/a.jpg","modules":["describe"],"moduleOptions":{"dating":{"k":${value}}}}`,
    });
    expect(res.statusCode, res.body.slice(0, 200)).toBe(400);
    const e = expectEnvelope(res.json());
    expect(e.code).toBe('VALIDATION_FAILED');
    expect(e.message).toContain(`moduleOptions.dating: ${message}`);
  });

  it('a body nested 400,000 levels deep is walked without overflowing the stack', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: { authorization: `Bearer ${user.testKey}`, 'content-type': 'application/json' },
      payload: `{"imageUrl":"https://example.com/a.jpg","moduleOptions":{"describe":{"k":${'['.repeat(400_000)}"\\u0000"${']'.repeat(400_000)}}}}`,
    });
    expect(res.statusCode, res.body.slice(0, 200)).toBe(400);
    expect(expectEnvelope(res.json()).code).toBe('VALIDATION_FAILED');
  });
});
