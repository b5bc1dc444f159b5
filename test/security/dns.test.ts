import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { createResolver, resolverLookup } from '../../images/dns.ts';
import { SSRF_BLOCKED_MESSAGE, UNRESOLVABLE_MESSAGE } from '../../images/ssrf.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';

/**
 * Image URLs are resolved off libuv's thread pool (images/dns.ts): the API's resolver is pointed,
 * through its dependencies, at real DNS servers on 127.0.0.1, one that never answers and one that
 * knows a few names.
 */

const HANGING = 50;
let silent: TestDnsServer;
let dns: TestDnsServer;
let silentApp: Pipeline;
let p: Pipeline;
let image: http.Server;
let imageHits = 0;

beforeAll(async () => {
  silent = await startDnsServer({ silent: true });
  dns = await startDnsServer({ records: { 'intranet.corp': '10.0.0.5', 'images.public.test': '127.0.0.2' } });
  image = http.createServer((req, res) => {
    imageHits++;
    if (req.url === '/photo.jpg') res.setHeader('content-type', 'image/jpeg').end(photoBytes('gps-DSCN0010.jpg'));
    else res.end('not an image');
  });
  await new Promise<void>((resolve) => image.listen(0, '127.0.0.2', resolve));
  // One 8 s try per query: the 50 lookups hang far longer than the requests measured beside them.
  // images.public.test (in its hosts text) stands for a public host serving a photo.
  silentApp = await startPipeline({
    fetchPolicy: {
      lookup: resolverLookup({ servers: [silent.address], hosts: '127.0.0.2 images.public.test\n', timeoutMs: 8_000, tries: 1, deadlineMs: 10_000 }),
      allowAddress: (ip) => ip === '127.0.0.2',
    },
  });
  p = await startPipeline({
    worker: false,
    fetchPolicy: {
      lookup: resolverLookup({ servers: [dns.address], hosts: '127.0.0.1 localhost\n10.1.2.3 db.internal\n' }),
      // images.public.test stands for a public host: its loopback address passes the policy.
      allowAddress: (ip) => ip === '127.0.0.2',
    },
  });
}, 120_000);
afterAll(async () => {
  await silentApp?.close();
  await p?.close();
  await silent?.close();
  await dns?.close();
  image?.close();
});

describe('DNS that never answers cannot stall the API', () => {
  it(`while ${HANGING} URL fetches wait on a silent DNS server, GET /v1/health, a base64 analyze and a URL analyze of a resolvable name answer at once`, async () => {
    const user = await createTestAccount(silentApp.db, { community: 100 });
    let settled = 0;
    const hanging = Array.from({ length: HANGING }, (_, i) =>
      silentApp.app
        .inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageUrl: `http://img-${i}.stall.example/p.jpg`, modules: ['describe'] } })
        .finally(() => settled++),
    );
    // Every one of them is really waiting on DNS: the silent server has seen each name.
    await expect.poll(() => new Set(silent.queries).size, { timeout: 10_000, interval: 50 }).toBe(HANGING);

    const healthStarted = performance.now();
    const health = await silentApp.app.inject({ method: 'GET', url: '/v1/health' });
    const healthMs = performance.now() - healthStarted;
    expect(health.statusCode).toBe(200);

    const analyzeStarted = performance.now();
    const analyzed = await silentApp.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['describe'] },
    });
    const analyzeMs = performance.now() - analyzeStarted;
    expect(analyzed.statusCode, analyzed.body).toBe(200);
    expect(analyzed.json().usage.creditsCharged).toBe(1);

    // Another customer's URL on a name that resolves is not queued behind the silent ones.
    const port = (image.address() as AddressInfo).port;
    const urlStarted = performance.now();
    const byUrl = await silentApp.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageUrl: `http://images.public.test:${port}/photo.jpg`, modules: ['describe'] },
    });
    const urlMs = performance.now() - urlStarted;
    expect(byUrl.statusCode, byUrl.body).toBe(200);
    expect(byUrl.json().usage.creditsCharged).toBe(1);
    // All three answered while all 50 were still hanging: nothing queued behind the lookups.
    expect(settled).toBe(0);
    process.stderr.write(
      `dns stall: ${HANGING} lookups hanging; health ${healthMs.toFixed(0)} ms, base64 analyze ${analyzeMs.toFixed(0)} ms, URL analyze ${urlMs.toFixed(0)} ms\n`,
    );

    // The silent names end like any name that does not resolve.
    const answers = await Promise.all(hanging);
    for (const a of answers) {
      expect(a.statusCode, a.body).toBe(400);
      expect(expectEnvelope(a.json())).toMatchObject({ code: 'VALIDATION_FAILED', message: UNRESOLVABLE_MESSAGE });
    }
  }, 90_000);
});

describe('no DNS oracle', () => {
  it('an internal name, a hosts-file name, a loopback name and an unknown name all get the same 400', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bodies: string[] = [];
    for (const host of ['intranet.corp', 'db.internal', 'localhost', 'no-such-name.corp']) {
      const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageUrl: `http://${host}/p.jpg`, preset: 'quick-scan' } });
      expect(res.statusCode, res.body).toBe(400);
      const e = expectEnvelope(res.json());
      expect(e.code).toBe('VALIDATION_FAILED');
      bodies.push(e.message);
    }
    expect(new Set(bodies)).toEqual(new Set([UNRESOLVABLE_MESSAGE]));
    // The two DNS names were really asked (the hosts-file ones were answered locally).
    expect(dns.queries).toEqual(expect.arrayContaining(['intranet.corp', 'no-such-name.corp']));
    expect(dns.queries).not.toContain('db.internal');
  });

  it('an address literal outside the policy stays the 400 naming the SSRF refusal (the URL itself shows it)', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageUrl: 'http://10.0.0.5/p.jpg', preset: 'quick-scan' } });
    expect(res.statusCode, res.body).toBe(400);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'VALIDATION_FAILED', message: SSRF_BLOCKED_MESSAGE });
  });
});

describe('the anonymous sandbox key makes no server-side fetch', () => {
  it('its URL lookups answer none, keyed by the URL, without a DNS query or a connection', async () => {
    const port = (image.address() as AddressInfo).port;
    const urls = [`http://images.public.test:${port}/a.jpg`, `http://images.public.test:${port}/b.jpg`];
    const queriesBefore = dns.queries.length;
    const hitsBefore = imageHits;
    const res = await p.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(ANONYMOUS_SANDBOX_KEY), payload: { images: urls } });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.results).toEqual({ [urls[0]!]: { matchType: 'none' }, [urls[1]!]: { matchType: 'none' } });
    expect(body.meta).toMatchObject({ imagesSubmitted: 2, imagesMatched: 0 });
    expect(dns.queries.length).toBe(queriesBefore);
    expect(imageHits).toBe(hitsBefore);

    // A URL no key may use is still refused as such.
    const ftp = await p.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(ANONYMOUS_SANDBOX_KEY), payload: { images: [urls[0], 'ftp://images.public.test/a.jpg'] } });
    expect(ftp.statusCode, ftp.body).toBe(400);
    expect(expectEnvelope(ftp.json()).message).toMatch(/^body\.images\.1: .*only http and https/);
  });

  it('the same URL with a user key is fetched (the policy above is what allows it)', async () => {
    const user = await createTestAccount(p.db);
    const port = (image.address() as AddressInfo).port;
    const hitsBefore = imageHits;
    const res = await p.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(user.liveKey), payload: { images: [`http://images.public.test:${port}/a.jpg`] } });
    // The test server answers text, not an image: 422 proves the fetch happened.
    expect(res.statusCode, res.body).toBe(422);
    expect(imageHits).toBe(hitsBefore + 1);
  });
});

describe('the resolver on its own', () => {
  it('bounds lookups querying at once; those waiting for a slot give up at the same deadline', async () => {
    const quiet = await startDnsServer({ silent: true });
    try {
      // c-ares tries each query twice, 5 s apart; the deadline is 1 s. Order, not time: when all six
      // have ended, the silent server must have seen each querying lookup's A and AAAA once and no
      // retry, so every caller, querying or waiting for a slot, gave up at the deadline, before
      // c-ares' own timeout. How long the six take: bench/timings.ts.
      const resolve = createResolver({ servers: [quiet.address], timeoutMs: 5_000, tries: 2, deadlineMs: 1_000, maxInFlight: 2 });
      const outcomes = await Promise.all(Array.from({ length: 6 }, (_, i) => resolve(`n${i}.quiet.example`).then(() => 'resolved', (e: { code: string }) => e.code)));
      expect(outcomes).toEqual(Array(6).fill('ETIMEOUT'));
      expect([...quiet.queries].sort()).toEqual(['n0.quiet.example', 'n0.quiet.example', 'n1.quiet.example', 'n1.quiet.example']);
      // Two lookups (an A and an AAAA query each) reached the server; four never got a slot.
      expect(new Set(quiet.queries)).toEqual(new Set(['n0.quiet.example', 'n1.quiet.example']));
    } finally {
      await quiet.close();
    }
  });

  it('answers hosts-file names first, case-insensitively and with a trailing dot, without a query', async () => {
    const before = dns.queries.length;
    const resolve = createResolver({ servers: [dns.address], hosts: '# comment\n10.9.8.7 Build.Internal build\n::1 build\n' });
    expect(await resolve('BUILD.internal.')).toEqual([{ address: '10.9.8.7', family: 4 }]);
    expect(await resolve('build')).toEqual([
      { address: '10.9.8.7', family: 4 },
      { address: '::1', family: 6 },
    ]);
    expect(await resolve('intranet.corp')).toEqual([{ address: '10.0.0.5', family: 4 }]);
    expect(dns.queries.length - before).toBe(2); // intranet.corp: A and AAAA
  });
});
