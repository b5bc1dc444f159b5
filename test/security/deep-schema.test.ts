import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { BESPOKE_LIMITS, compileDraft } from '../../bespoke/schema.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => t?.close());

/**
 * An extract.schema nested `depth` levels below its root property, each level one more
 * `properties` (or array `items`) hop, as JSON text: JSON.stringify itself recurses.
 */
function nested(depth: number, via: 'properties' | 'items'): string {
  const open = via === 'properties' ? '{"type":"object","properties":{"a":' : '{"type":"array","items":';
  const close = via === 'properties' ? '}}' : '}';
  return `{"type":"object","properties":{"root":${open.repeat(depth)}{"type":"string"}${close.repeat(depth)}}}`;
}

const v2 = (schema: string | Record<string, unknown>, key = ANONYMOUS_SANDBOX_KEY) =>
  t.app.inject({
    method: 'POST',
    url: '/v2/analyze',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    payload: `{"imageBase64":${JSON.stringify(photoBase64('Canon_40D.jpg'))},"preset":"quick-scan","extract":{"schema":${typeof schema === 'string' ? schema : JSON.stringify(schema)}}}`,
  });

describe('extract.schema nesting is bounded before any recursive validation', () => {
  for (const via of ['properties', 'items'] as const) {
    it(`700 levels through ${via} with the anonymous key: 400 VALIDATION_FAILED naming the depth, not a 500`, async () => {
      const res = await v2(nested(700, via));
      expect(res.statusCode, res.body).toBe(400);
      const e = expectEnvelope(res.json());
      expect(e.code).toBe('VALIDATION_FAILED');
      expect(e.message).toContain(`nested deeper than ${BESPOKE_LIMITS.maxDepth} levels`);
    });
  }

  it('100,000 levels (a body far past any stack) is refused the same way', async () => {
    const res = await v2(nested(100_000, 'items'));
    expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
    expect(expectEnvelope(res.json()).code).toBe('VALIDATION_FAILED');
  });

  it('a schema at the depth limit still answers 200 with schema-shaped sandbox output; one level more is 400', async () => {
    const user = await createTestAccount(t.db);
    // The schema object is level 1 and `root` level 2, so maxDepth - 2 hops put the leaf at maxDepth.
    const atLimit = await v2(nested(BESPOKE_LIMITS.maxDepth - 2, 'properties'), user.testKey);
    expect(atLimit.statusCode, atLimit.body).toBe(200);
    expect(atLimit.json().output.bespoke.data.root).toHaveProperty('a');
    const over = await v2(nested(BESPOKE_LIMITS.maxDepth - 1, 'properties'), user.testKey);
    expect(over.statusCode, over.body).toBe(400);
    expect(expectEnvelope(over.json()).message).toContain(`nested deeper than ${BESPOKE_LIMITS.maxDepth} levels`);
  });

  it('required names an inherited Object property ("toString", "constructor"): refused like any missing property', async () => {
    for (const name of ['toString', 'constructor', '__proto__']) {
      const res = await v2({ type: 'object', properties: { merchant: { type: 'string' } }, required: ['merchant', name] });
      expect(res.statusCode, res.body).toBe(400);
      const e = expectEnvelope(res.json());
      expect(e.code).toBe('VALIDATION_FAILED');
      expect(e.message).toContain(`"${name}" is not a property`);
    }
  });
});

describe('a drafted field named like an Object.prototype member', () => {
  it('is kept and required like any other name, not mistaken for a duplicate', () => {
    const field = (name: string) => ({ name, type: 'string' as const, description: name, enumValues: null, required: true });
    const schema = compileDraft({ fields: [field('constructor'), field('toString'), field('merchant')] });
    expect(Object.keys(schema.properties)).toEqual(['constructor', 'toString', 'merchant']);
    expect(schema.required).toEqual(['constructor', 'toString', 'merchant']);
  });
});
