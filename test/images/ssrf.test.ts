import ipaddr from 'ipaddr.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchImage, type FetchImageOptions } from '../../images/fetch.ts';
import { isPublicAddress, UNRESOLVABLE_MESSAGE } from '../../images/ssrf.ts';
import { photo } from './photos.ts';
import { closedPort, failingLookup, scriptedLookup, type Canary, type PublicServer, startCanaryAndPublic } from './servers.ts';

describe('isPublicAddress', () => {
  const blocked: Array<[string, string]> = [
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', '"this network" 0/8'],
    ['10.0.0.1', 'RFC 1918 10/8'],
    ['10.255.255.255', 'RFC 1918 10/8 top'],
    ['100.64.0.1', 'CGNAT 100.64/10'],
    ['100.127.255.255', 'CGNAT 100.64/10 top'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback /8'],
    ['169.254.169.254', 'link-local cloud metadata'],
    ['172.16.0.1', 'RFC 1918 172.16/12'],
    ['172.31.255.255', 'RFC 1918 172.16/12 top'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.0.2.1', 'TEST-NET-1'],
    ['192.88.99.1', 'deprecated 6to4 relay'],
    ['192.168.1.1', 'RFC 1918 192.168/16'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking top'],
    ['198.51.100.7', 'TEST-NET-2'],
    ['203.0.113.9', 'TEST-NET-3'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast SSDP'],
    ['240.0.0.1', 'reserved 240/4'],
    ['255.255.255.255', 'broadcast'],
    ['::', 'IPv6 unspecified'],
    ['::1', 'IPv6 loopback'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback (dotted)'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback (hex)'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['::127.0.0.1', 'IPv4-compatible loopback'],
    ['::8.8.8.8', 'IPv4-compatible (deprecated form, never a destination)'],
    ['::ffff:0:127.0.0.1', 'IPv4-translated (RFC 6145)'],
    ['64:ff9b::7f00:1', 'NAT64 embedding loopback'],
    ['64:ff9b::a00:1', 'NAT64 embedding 10.0.0.1'],
    ['64:ff9b:1::a00:1', 'local-use NAT64 prefix'],
    ['2002:7f00:1::1', '6to4 embedding loopback'],
    ['2002:c0a8:101::1', '6to4 embedding 192.168.1.1'],
    ['2001::1', 'Teredo'],
    ['2001:2::1', 'benchmarking v6'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation (RFC 9637)'],
    ['fc00::1', 'ULA'],
    ['fd00::1', 'ULA'],
    ['fe80::1', 'link-local'],
    ['febf:ffff::1', 'link-local top'],
    ['fe80::1%eth0', 'link-local with zone'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast v6'],
    ['100::1', 'discard prefix'],
    ['5f00::1', 'SRv6 SIDs'],
    ['0177.0.0.1', 'octal text is not a canonical address'],
    ['2130706433', 'decimal text is not a canonical address'],
    ['0x7f000001', 'hex text is not a canonical address'],
    ['localhost', 'names are not addresses'],
    ['', 'empty'],
  ];
  it.each(blocked)('refuses %s (%s)', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  const allowed = [
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1', // just above 172.16/12
    '172.15.255.255', // just below
    '100.63.255.255', // just below 100.64/10
    '100.128.0.1', // just above
    '192.169.0.1',
    '198.20.0.1', // just above 198.18/15
    '223.255.255.255', // just below multicast
    '192.31.196.1', // AS112: globally reachable per IANA
    '2606:4700:4700::1111',
    '2a00:1450:4001::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808', // NAT64 of a public address
    '2002:808:808::1', // 6to4 of a public address
  ];
  it.each(allowed)('allows public %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });

  it('agrees with ipaddr.js special ranges except the documented differences', () => {
    // Our table is our own; ipaddr.js is the independent check. Differences are deliberate:
    // AS112/AMT are globally reachable (IANA), and 6to4/NAT64 are judged by the embedded IPv4.
    const deliberate = new Set(['as112', 'amt', 'as112v6', '6to4', 'rfc6052', 'ipv4Mapped']);
    const samples = [...blocked.map(([ip]) => ip), ...allowed].filter((ip) => ipaddr.isValid(ip) && !/^0x|^0\d|^\d+$/.test(ip));
    for (const ip of samples) {
      const range = ipaddr.parse(ip).range();
      if (deliberate.has(range)) continue;
      expect({ ip, public: isPublicAddress(ip) }).toEqual({ ip, public: range === 'unicast' });
    }
  });
});

describe('fetchImage', () => {
  const image = photo('Canon_40D.jpg');
  let canary: Canary;
  let pub: PublicServer;
  let P: number;
  // 127.0.0.2 stands in for "the public internet"; the rest of the policy is unchanged.
  const allowAddress = (ip: string) => ip === '127.0.0.2' || isPublicAddress(ip);
  const opts = (extra: Partial<FetchImageOptions> = {}): FetchImageOptions => ({
    maxBytes: 1024 * 1024,
    timeoutMs: 5_000,
    allowAddress,
    ...extra,
  });

  beforeAll(async () => {
    ({ canary, server: pub } = await startCanaryAndPublic(image));
    P = canary.port;
  });
  afterAll(async () => {
    await pub.close();
    await canary.close();
  });

  describe('refuses every route into private space, and the canary never sees a connection', () => {
    // {P} is the canary's port (the public server shares it on 127.0.0.2).
    const refusedUrls = [
      'http://127.0.0.1:{P}/',
      'http://127.0.0.1.:{P}/',
      'http://10.0.0.1:{P}/',
      'http://172.16.0.1:{P}/',
      'http://192.168.0.1:{P}/',
      'http://169.254.169.254/latest/meta-data/',
      'http://100.64.0.1:{P}/',
      'http://0.0.0.0:{P}/',
      'http://0:{P}/',
      'http://[::]:{P}/',
      'http://[::1]:{P}/',
      'http://[::ffff:127.0.0.1]:{P}/',
      'http://[::ffff:7f00:1]:{P}/',
      'http://[::127.0.0.1]:{P}/',
      'http://[fd00::1]:{P}/',
      'http://[fe80::1]:{P}/',
      'http://2130706433:{P}/',
      'http://0177.0.0.1:{P}/',
      'http://0x7f000001:{P}/',
      'http://0x7f.1:{P}/',
      'http://127.1:{P}/',
      'http://user@127.0.0.1:{P}/',
      'http://127.0.0.2:{P}@127.0.0.1:{P}/',
      'http://user:pass@127.0.0.2:{P}/image.jpg', // credentials are refused even for an allowed host
      'https://127.0.0.1:{P}/',
      'ftp://127.0.0.2:{P}/image.jpg',
      'file:///etc/passwd',
      'gopher://127.0.0.1:{P}/',
    ];
    it.each(refusedUrls)('refuses %s', async (template) => {
      const url = template.replaceAll('{P}', String(P));
      await expect(fetchImage(url, opts())).rejects.toMatchObject({
        code: 'VALIDATION_FAILED',
        status: 400,
        message: expect.stringMatching(/server-side request forgery/),
      });
      expect(canary.connections()).toBe(0);
    });

    // A name is refused with the answer an unknown name gets: no oracle of which internal names exist.
    const unresolvable = { code: 'VALIDATION_FAILED', status: 400, message: UNRESOLVABLE_MESSAGE };

    it('refuses a DNS name that resolves to loopback, exactly as an unknown name', async () => {
      const lookup = scriptedLookup([['127.0.0.1']]);
      await expect(fetchImage(`http://images.example.test:${P}/image.jpg`, opts({ lookup }))).rejects.toMatchObject(unresolvable);
      expect(lookup.calls).toEqual(['images.example.test']);
      await expect(fetchImage(`http://no-such-host.example.test:${P}/image.jpg`, opts({ lookup: failingLookup }))).rejects.toMatchObject(unresolvable);
      await expect(fetchImage(`http://localhost:${P}/`, opts())).rejects.toMatchObject(unresolvable);
      expect(canary.connections()).toBe(0);
    });

    it('refuses a name when ANY of its addresses is private, even if the first is allowed', async () => {
      const lookup = scriptedLookup([['127.0.0.2', '127.0.0.1']]);
      await expect(fetchImage(`http://mixed.example.test:${P}/image.jpg`, opts({ lookup }))).rejects.toMatchObject(unresolvable);
      expect(pub.hits.get('/image.jpg') ?? 0).toBe(0);
      expect(canary.connections()).toBe(0);
    });

    it('refuses a redirect from the public server into 127.0.0.1', async () => {
      await expect(fetchImage(`${pub.origin}/to-canary`, opts())).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      await expect(fetchImage(`${pub.origin}/to-canary-decimal`, opts())).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      await expect(fetchImage(`${pub.origin}/to-canary-v6`, opts())).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      await expect(fetchImage(`${pub.origin}/to-file`, opts())).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      expect(pub.hits.get('/to-canary')).toBe(1);
      expect(canary.connections()).toBe(0);
    });

    it('stops a redirect loop after the cap (1 request + 3 redirects)', async () => {
      await expect(fetchImage(`${pub.origin}/loop`, opts())).rejects.toMatchObject({
        code: 'IMAGE_INVALID',
        message: expect.stringMatching(/redirected more than 3 times/),
      });
      expect(pub.hits.get('/loop')).toBe(4);
      expect(canary.connections()).toBe(0);
    });

    it('connects only to the checked address: a second DNS answer (rebinding) is never used', async () => {
      // First answer is allowed, every later one is the canary; the fetch must not ask again.
      const lookup = scriptedLookup([['127.0.0.2'], ['127.0.0.1']]);
      const got = await fetchImage(`http://rebind.example.test:${P}/image.jpg`, opts({ lookup }));
      expect(got.bytes.equals(image)).toBe(true);
      expect(lookup.calls).toEqual(['rebind.example.test']);
      expect(pub.hosts.at(-1)).toBe(`rebind.example.test:${P}`); // Host header keeps the name
      expect(canary.connections()).toBe(0);
    });
  });

  it('returns the exact bytes and content type from an allowed server', async () => {
    const got = await fetchImage(`${pub.origin}/image.jpg`, opts());
    expect(got.bytes.equals(image)).toBe(true);
    expect(got.contentType).toBe('image/jpeg');
    expect(got.finalUrl).toBe(`${pub.origin}/image.jpg`);
  });

  it('follows up to 3 redirects and reports the final URL', async () => {
    const got = await fetchImage(`${pub.origin}/chain/3`, opts());
    expect(got.bytes.equals(image)).toBe(true);
    expect(got.finalUrl).toBe(`${pub.origin}/image.jpg`);
    await expect(fetchImage(`${pub.origin}/chain/4`, opts())).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    await expect(fetchImage(`${pub.origin}/chain/2`, opts({ maxRedirects: 1 }))).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
  });

  it('refuses an image over the cap by its Content-Length, before reading the body', async () => {
    // The server never sends a body: only the header check can end this before the timeout.
    await expect(fetchImage(`${pub.origin}/declared-huge`, opts({ timeoutMs: 10_000 }))).rejects.toMatchObject({
      code: 'IMAGE_TOO_LARGE',
      message: expect.stringMatching(/1000000000 bytes/),
    });
  });

  it('aborts an endless body as soon as it passes the cap, and hangs up', async () => {
    await expect(fetchImage(`${pub.origin}/endless`, opts({ maxBytes: 256 * 1024 }))).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    await pub.endlessClosed; // the server sees the connection close
  });

  it('enforces the cap on a body without Content-Length', async () => {
    await expect(fetchImage(`${pub.origin}/chunked.jpg`, opts({ maxBytes: image.length - 1 }))).rejects.toMatchObject({ code: 'IMAGE_TOO_LARGE' });
    const got = await fetchImage(`${pub.origin}/chunked.jpg`, opts({ maxBytes: image.length }));
    expect(got.bytes.equals(image)).toBe(true);
  });

  it('times out a server that never answers', async () => {
    // "within 300 ms" is said only when the fetch's own deadline fired (images/fetch.ts), so this is
    // the deadline ending it, not a socket or test timeout. How soon: bench/timings.ts.
    await expect(fetchImage(`${pub.origin}/silent`, opts({ timeoutMs: 300 }))).rejects.toMatchObject({
      code: 'IMAGE_INVALID',
      message: expect.stringMatching(/within 300 ms/),
    });
  });

  it('times out a server that drips bytes forever (overall deadline, not idle timeout)', async () => {
    await expect(fetchImage(`${pub.origin}/drip`, opts({ timeoutMs: 300 }))).rejects.toMatchObject({
      code: 'IMAGE_INVALID',
      message: expect.stringMatching(/within 300 ms/),
    });
  });

  it('maps non-2xx, truncated bodies and refused connections to IMAGE_INVALID; a name that does not resolve is refused like a private one', async () => {
    await expect(fetchImage(`${pub.origin}/missing`, opts())).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/HTTP 404/) });
    await expect(fetchImage(`${pub.origin}/short`, opts())).rejects.toMatchObject({ code: 'IMAGE_INVALID' });
    const port = await closedPort();
    await expect(fetchImage(`http://127.0.0.2:${port}/x.jpg`, opts())).rejects.toMatchObject({ code: 'IMAGE_INVALID', message: expect.stringMatching(/refused/) });
    await expect(fetchImage('http://no-such-host.example.test/x.jpg', opts({ lookup: failingLookup }))).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      message: UNRESOLVABLE_MESSAGE,
    });
  });

  it('treats 127.0.0.2 as private under the default policy', async () => {
    await expect(fetchImage(`${pub.origin}/image.jpg`, { maxBytes: 1024 * 1024 })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });
});
