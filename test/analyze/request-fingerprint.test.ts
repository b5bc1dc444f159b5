import { describe, expect, it } from 'vitest';
import { requestFingerprint } from '../../analysis/request-binding.ts';

describe('requestFingerprint', () => {
  it('is the same for the same request whatever the key order, and differs for any other value', () => {
    const a = requestFingerprint({ modules: ['dating', 'describe'], imageUrl: 'https://e.x/a.jpg', context: { vehicle: { make: 'VW', year: 1990 } } });
    expect(requestFingerprint({ context: { vehicle: { year: 1990, make: 'VW' } }, imageUrl: 'https://e.x/a.jpg', modules: ['dating', 'describe'] })).toBe(a);
    expect(requestFingerprint({ modules: ['describe', 'dating'], imageUrl: 'https://e.x/a.jpg', context: { vehicle: { make: 'VW', year: 1990 } } })).not.toBe(a);
    expect(requestFingerprint({ modules: ['dating', 'describe'], imageUrl: 'https://e.x/a.jpg', context: { vehicle: { make: 'VW', year: '1990' } } })).not.toBe(a);
    expect(requestFingerprint({ modules: ['dating', 'describe'], imageUrl: 'https://e.x/a.jpg', context: { vehicle: { make: 'VW', year: 1990 } }, refresh: true })).not.toBe(a);
    // An absent field and an undefined one are the same request.
    expect(requestFingerprint({ a: 1, b: undefined })).toBe(requestFingerprint({ a: 1 }));
    expect(a).toMatch(/^[0-9a-f]{64}$/);
  });

  it('walks a body nested 100,000 levels deep without overflowing the stack', () => {
    const root: Record<string, unknown> = {};
    let cur = root;
    for (let i = 0; i < 100_000; i++) cur = (cur.a = {}) as Record<string, unknown>;
    expect(requestFingerprint(root)).toMatch(/^[0-9a-f]{64}$/);
  });
});
