import { describe, expect, it } from 'vitest';
import { OutageReporter } from '../../ratelimit/outage.ts';
import { bucketsFor, POLICIES } from '../../ratelimit/policy.ts';

const user = { accountId: 'usr_1', keyHash: 'h1', anonymous: false, sandbox: false };
const ip = () => '203.0.113.9';

describe('which limits apply', () => {
  it('the numbers of docs/contract.md', () => {
    expect([POLICIES.user.limit, POLICIES.user.windowMs]).toEqual([600, 60_000]);
    expect([POLICIES.lookup.limit, POLICIES.lookup.windowMs]).toEqual([300, 60_000]);
    expect([POLICIES.anonymousMinute.limit, POLICIES.anonymousMinute.windowMs]).toEqual([2, 60_000]);
    expect([POLICIES.anonymousDay.limit, POLICIES.anonymousDay.windowMs]).toEqual([10, 86_400_000]);
  });

  it('a sandbox key of the user counts in a bucket of its own, in the same hash slot', () => {
    expect(bucketsFor('p:', { ...user, keyHash: 'h3', sandbox: true }, '/v1/modules', ip).map((x) => [x.key, x.limit])).toEqual([['p:rl:{u:usr_1}:sandbox', 600]]);
  });

  it('every live key of a user shares the user bucket; lookup adds a bucket per key in the same hash slot', () => {
    const a = bucketsFor('p:', user, '/v1/modules', ip);
    const b = bucketsFor('p:', { ...user, keyHash: 'h2' }, '/v1/analyze', ip);
    expect(a.map((x) => x.key)).toEqual(['p:rl:{u:usr_1}:all']);
    expect(b.map((x) => x.key)).toEqual(['p:rl:{u:usr_1}:all']);
    const lookup = bucketsFor('p:', user, '/v2/lookup', ip);
    expect(lookup.map((x) => [x.key, x.limit])).toEqual([
      ['p:rl:{u:usr_1}:all', 600],
      ['p:rl:{u:usr_1}:lookup:h1', 300],
    ]);
  });

  it('the anonymous key is limited per client IP only, on lookup too', () => {
    const anon = { accountId: null, keyHash: 'anon', anonymous: true, sandbox: true };
    for (const route of ['/v1/analyze', '/v2/lookup']) {
      expect(bucketsFor('p:', anon, route, ip).map((x) => [x.key, x.limit, x.windowMs])).toEqual([
        ['p:rl:{ip:203.0.113.9}:anon:m', 2, 60_000],
        ['p:rl:{ip:203.0.113.9}:anon:d', 10, 86_400_000],
      ]);
    }
  });

  it('the client IP is only worked out for the anonymous key', () => {
    let asked = 0;
    bucketsFor('p:', user, '/v2/lookup', () => `${asked++}`);
    expect(asked).toBe(0);
  });
});

describe('outage reporter', () => {
  it('logs the start at once, then at most once per interval with the count, and the end', () => {
    let t = 0;
    const lines: Array<[string, string, Record<string, unknown>]> = [];
    const log = {
      error: (o: object, m: string) => lines.push(['error', m, o as Record<string, unknown>]),
      warn: (o: object, m: string) => lines.push(['warn', m, o as Record<string, unknown>]),
    };
    const r = new OutageReporter(log, 30_000, () => t);
    r.succeeded();
    expect(lines).toEqual([]);
    r.failed(new Error('ECONNREFUSED'));
    for (let i = 0; i < 99; i++) {
      t += 100;
      r.failed(new Error('ECONNREFUSED'));
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]![0]).toBe('error');
    expect(lines[0]![1]).toMatch(/NOT rate-limited/);
    expect(lines[0]![2]).toMatchObject({ unlimitedRequests: 1, err: 'Error: ECONNREFUSED' });
    t = 30_000;
    r.failed(new Error('timeout'));
    expect(lines).toHaveLength(2);
    expect(lines[1]![2]).toMatchObject({ unlimitedRequests: 100, outageMs: 30_000 });
    t = 31_000;
    r.succeeded();
    expect(lines[2]).toEqual(['warn', 'rate limiter: Redis reachable again, limits enforced', { outageMs: 31_000, unlimitedRequests: 101 }]);
    r.succeeded();
    expect(lines).toHaveLength(3);
  });
});
