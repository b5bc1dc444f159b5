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

  it('tells apart strings a lossy or unframed encoding would merge', () => {
    const bodies: unknown[] = [
      { s: 'Ā' }, // U+0100: its low byte alone is NUL
      { s: '\u0000' },
      { s: 'ĀĀ' },
      { s: '\u0000\u0001\u0000\u0001' },
      { s: 'é' },
      { s: '\u00c3\u00a9' }, // é's UTF-8 bytes read as latin1
      { s: ['a","b'] },
      { s: ['a', 'b'] },
      { s: ['ab'] },
      { s: '1' },
      { s: 1 },
      { s: 'null' },
      { s: null },
      { s: '😀' },
      { s: '\ud83d\ude00x' },
    ];
    const prints = bodies.map((b) => requestFingerprint(b));
    expect(new Set(prints).size).toBe(bodies.length);
    expect(requestFingerprint({ s: 'Ā' })).toBe(prints[0]);
  });

  it('walks a body nested 100,000 levels deep without overflowing the stack', () => {
    const root: Record<string, unknown> = {};
    let cur = root;
    for (let i = 0; i < 100_000; i++) cur = (cur.a = {}) as Record<string, unknown>;
    expect(requestFingerprint(root)).toMatch(/^[0-9a-f]{64}$/);
  });
});
