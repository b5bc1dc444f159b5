import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { toStrictJsonSchema, type BespokeSchema } from '../../bespoke/schema.ts';
import { getBalance } from '../../credits/ledger.ts';
import { checkAgainstSchema } from '../../vendors/output-schema.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());
beforeEach(() => p.sim.reset());

const v2 = (key: string, body: Record<string, unknown>) => p.app.inject({ method: 'POST', url: '/v2/analyze', headers: bearer(key), payload: body });

const RECEIPT: BespokeSchema = {
  type: 'object',
  properties: {
    merchant: { type: 'string', description: 'Shop name on the receipt' },
    total: { type: 'number', description: 'Total amount paid' },
    currency: { type: 'string', enum: ['EUR', 'USD', 'GBP'] },
    items: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, price: { type: 'number' } }, required: ['name'] } },
  },
  required: ['merchant', 'total'],
};

describe('POST /v2/analyze with extract', () => {
  it('an inline schema: 5 credits on top of the lens delta, output.bespoke conforms, the schema is saved once, repeats bill 5 again', async () => {
    const user = await createTestAccount(p.db, { community: 50 });
    const img = photoBase64('Canon_40D.jpg');
    const first = await v2(user.liveKey, { imageBase64: img, modules: ['describe'], extract: { schema: RECEIPT } });
    expect(first.statusCode, first.body).toBe(200);
    const a = first.json();
    expect(a.usage.creditsCharged).toBe(1 + 5);
    expect(a.usage.modulesUsed).toContain('bespoke');
    expect(a.output.bespoke.schemaId).toMatch(/^bsk_[0-9a-f]{32}$/);
    expect(checkAgainstSchema(toStrictJsonSchema(RECEIPT), a.output.bespoke.data)).toEqual({ ok: true, errors: [] });
    expect(a.output).toHaveProperty('caption');

    const again = await v2(user.liveKey, { imageBase64: img, modules: ['describe'], extract: { schema: RECEIPT } });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().usage.creditsCharged).toBe(5);
    expect(again.json().meta.cacheHit).toBe(false);
    expect(again.json().output.bespoke.schemaId).toBe(a.output.bespoke.schemaId);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 50 - 6 - 5, reserved: 0 });
    const saved = await p.db.query('SELECT count(*)::int AS n FROM bespoke_schemas WHERE user_id = $1', [user.userId]);
    expect(saved.rows[0].n).toBe(1);
    // Extraction bypasses the projection: nothing bespoke is stored as a lens record.
    const lenses = await p.db.query('SELECT lens FROM lens_records WHERE user_id = $1 ORDER BY lens', [user.userId]);
    expect(lenses.rows.map((r) => r.lens)).toEqual(['describe', 'moderation']);
  });

  it('a prompt: the vendor drafts a schema (saved with the prompt), then extracts; the saved id works later', async () => {
    const user = await createTestAccount(p.db, { community: 50 });
    const res = await v2(user.liveKey, { imageBase64: photoBase64('gps-DSCN0010.jpg'), preset: 'quick-scan', extract: { prompt: 'The street name and any shop signs visible' } });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    expect(a.usage.creditsCharged).toBe(5);
    const id = a.output.bespoke.schemaId;
    const row = await p.db.query('SELECT schema, prompt FROM bespoke_schemas WHERE id = $1', [id]);
    expect(row.rows[0].prompt).toBe('The street name and any shop signs visible');
    expect(row.rows[0].schema.type).toBe('object');
    expect(checkAgainstSchema(toStrictJsonSchema(row.rows[0].schema), a.output.bespoke.data).ok).toBe(true);
    // The draft call and the extraction call both reached a vendor.
    expect(p.sim.stats().openai.calls).toBe(2);

    const byId = await v2(user.liveKey, { imageBase64: photoBase64('gps-DSCN0012.jpg'), preset: 'quick-scan', extract: { schemaId: id } });
    expect(byId.statusCode, byId.body).toBe(200);
    expect(byId.json().output.bespoke.schemaId).toBe(id);
    expect(byId.json().usage.creditsCharged).toBe(5);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 40, reserved: 0 });
  });

  it("another user's schemaId, or an unknown one, is 404 SCHEMA_NOT_FOUND and nothing moves", async () => {
    const owner = await createTestAccount(p.db, { community: 20 });
    const made = await v2(owner.liveKey, { imageBase64: photoBase64('Nikon_D70.jpg'), preset: 'quick-scan', extract: { schema: RECEIPT } });
    const id = made.json().output.bespoke.schemaId;
    const other = await createTestAccount(p.db, { community: 20 });
    for (const schemaId of [id, 'bsk_' + '0'.repeat(32)]) {
      const res = await v2(other.liveKey, { imageBase64: photoBase64('Nikon_D70.jpg'), preset: 'quick-scan', extract: { schemaId } });
      expect(res.statusCode).toBe(404);
      expect(expectEnvelope(res.json()).code).toBe('SCHEMA_NOT_FOUND');
    }
    expect(await getBalance(p.db, other.userId)).toMatchObject({ community: 20, reserved: 0 });
    const photos = await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [other.userId]);
    expect(photos.rows[0].n).toBe(0);
  });

  it('a vendor failure during extraction → 502 with the credits released', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http400' });
    const res = await v2(user.liveKey, { imageBase64: photoBase64('Pentax_K10D.jpg'), preset: 'quick-scan', extract: { prompt: 'the camera brand' } });
    expect(res.statusCode).toBe(502);
    expect(expectEnvelope(res.json()).code).toBe('PROVIDER_ERROR');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 20, reserved: 0 });
  });

  it('a sandbox key gets schema-shaped fixture data, 0 credits, no vendor call', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const res = await v2(user.testKey, { imageBase64: photoBase64('Pentax_K10D.jpg'), modules: ['describe'], extract: { schema: RECEIPT } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().usage.creditsCharged).toBe(0);
    expect(checkAgainstSchema(toStrictJsonSchema(RECEIPT), res.json().output.bespoke.data).ok).toBe(true);
    expect(p.sim.stats().openai.calls).toBe(0);
  });
});

describe('extract validation → 400 naming the problem', () => {
  const cases: Array<[string, unknown, string]> = [
    ['two of prompt/schema/schemaId', { prompt: 'x', schemaId: 'bsk_' + 'a'.repeat(32) }, 'exactly one'],
    ['none of them', {}, 'exactly one'],
    ['an empty prompt', { prompt: '' }, 'prompt'],
    ['a prompt over 500', { prompt: 'p'.repeat(501) }, 'prompt'],
    ['a malformed schemaId', { schemaId: 'bsk_XYZ' }, 'schemaId'],
    ['a non-object root', { schema: { type: 'string', properties: {} } }, 'type'],
    ['an array without items', { schema: { type: 'object', properties: { a: { type: 'array' } } } }, 'items'],
    ['required naming a missing property', { schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['b'] } }, 'required'],
    ['a bad property name', { schema: { type: 'object', properties: { 'a b': { type: 'string' } } } }, 'properties.a b'],
    ['nesting deeper than 5', { schema: { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'object', properties: { c: { type: 'object', properties: { d: { type: 'object', properties: { e: { type: 'string' } } } } } } } } } } } }, 'deeper'],
    ['an unknown keyword', { schema: { type: 'object', properties: { a: { type: 'string', format: 'email' } } } }, 'format'],
  ];
  for (const [name, extract, fragment] of cases) {
    it(name, async () => {
      const user = await createTestAccount(p.db, { community: 20 });
      const res = await v2(user.liveKey, { imageBase64: photoBase64('Canon_40D.jpg'), preset: 'quick-scan', extract });
      expect(res.statusCode, res.body).toBe(400);
      const e = expectEnvelope(res.json());
      expect(e.code).toBe('VALIDATION_FAILED');
      expect(e.message).toContain(fragment);
      expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 20, reserved: 0 });
    });
  }
});
