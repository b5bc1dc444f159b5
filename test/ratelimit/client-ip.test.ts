import { describe, expect, it } from 'vitest';
import { clientAddress, ipBucket, parseAddress, parseTrustedProxies } from '../../ratelimit/client-ip.ts';

const client = (peer: string | undefined, xff: string | string[] | undefined, trusted: string) =>
  ipBucket(clientAddress(peer, xff, parseTrustedProxies(trusted)));

describe('client IP bucket', () => {
  it('IPv6 addresses in one /64 share a bucket; the next /64 is another', () => {
    const a = ipBucket(parseAddress('2001:db8:abcd:12:1:2:3:4'));
    expect(a).toBe('2001:db8:abcd:12::/64');
    expect(ipBucket(parseAddress('2001:db8:abcd:12:ffff:ffff:ffff:ffff'))).toBe(a);
    expect(ipBucket(parseAddress('2001:0db8:abcd:0012::1'))).toBe(a);
    expect(ipBucket(parseAddress('2001:db8:abcd:13::1'))).toBe('2001:db8:abcd:13::/64');
  });

  it('IPv4 is bucketed per address, and IPv4-mapped IPv6 (dual-stack sockets) is the IPv4 address', () => {
    expect(ipBucket(parseAddress('203.0.113.9'))).toBe('203.0.113.9');
    expect(ipBucket(parseAddress('203.0.113.10'))).toBe('203.0.113.10');
    expect(ipBucket(parseAddress('::ffff:203.0.113.9'))).toBe('203.0.113.9');
  });

  it('reads addresses as proxies write them and nothing else', () => {
    expect(parseAddress('198.51.100.7:8443')?.toString()).toBe('198.51.100.7');
    expect(parseAddress('[2001:db8::5]:443')?.toString()).toBe('2001:db8::5');
    expect(parseAddress(' 2001:db8::5 ')?.toString()).toBe('2001:db8::5');
    for (const bad of ['unknown', 'example.com', '127.1', '0x7f.0.0.1', '', '1.2.3.4.5']) expect(parseAddress(bad), bad).toBeNull();
  });
});

describe('client address behind proxies', () => {
  it('an untrusted peer is the client, whatever X-Forwarded-For it sends', () => {
    expect(client('192.0.2.50', '198.51.100.1', '')).toBe('192.0.2.50');
    expect(client('192.0.2.50', '198.51.100.1', '10.0.0.0/8')).toBe('192.0.2.50');
  });

  it('from a trusted proxy, the rightmost address not itself a trusted proxy is the client', () => {
    expect(client('10.0.0.5', '198.51.100.1', '10.0.0.0/8')).toBe('198.51.100.1');
    // The client prepended a fake address; our proxies appended the real one to its right.
    expect(client('10.0.0.5', '203.0.113.66, 198.51.100.1', '10.0.0.0/8')).toBe('198.51.100.1');
    // Two trusted hops (a CDN edge, then our load balancer).
    expect(client('10.0.0.5', '203.0.113.66, 198.51.100.1, 10.9.9.9', '10.0.0.0/8')).toBe('198.51.100.1');
    // Several X-Forwarded-For header lines are one list.
    expect(client('10.0.0.5', ['203.0.113.66', '198.51.100.1, 10.9.9.9'], '10.0.0.0/8')).toBe('198.51.100.1');
    expect(client('::ffff:10.0.0.5', '198.51.100.1', '10.0.0.0/8')).toBe('198.51.100.1');
    expect(client('::1', '2001:db8:1:2::99', '::1, 10.0.0.0/8')).toBe('2001:db8:1:2::/64');
  });

  it('a trusted proxy without X-Forwarded-For is itself the client', () => {
    expect(client('10.0.0.5', undefined, '10.0.0.5')).toBe('10.0.0.5');
    expect(client('10.0.0.5', '', '10.0.0.5')).toBe('10.0.0.5');
  });

  it('when every hop is trusted, the leftmost is the client', () => {
    expect(client('10.0.0.5', '10.1.1.1, 10.2.2.2', '10.0.0.0/8')).toBe('10.1.1.1');
  });

  it('an unparsable hop ends the walk at the last address a trusted proxy vouched for', () => {
    expect(client('10.0.0.5', '198.51.100.1, garbage', '10.0.0.0/8')).toBe('10.0.0.5');
    expect(client('10.0.0.5', 'garbage, 10.7.7.7', '10.0.0.0/8')).toBe('10.7.7.7');
  });

  it('TRUSTED_PROXIES with a typo fails at startup instead of trusting nobody', () => {
    expect(() => parseTrustedProxies('10.0.0.0/8, 10.0.0.300')).toThrow(/10\.0\.0\.300/);
    expect(() => parseTrustedProxies('10.0.0.0/33')).toThrow(/CIDR/);
    expect(parseTrustedProxies(' ,10.0.0.1 , ::1,')).toHaveLength(2);
  });
});
