import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reserve } from '../../credits/ledger.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, INTERNAL_SECRET, type TestApp } from '../helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => t.close());

describe('GET /v1/modules', () => {
  it('lists the 16 lenses and 8 stacks exactly as docs/contract.md says', async () => {
    const user = await createTestAccount(t.db);
    const res = await t.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(user.liveKey) });
    expect(res.statusCode).toBe(200);
    const { modules, presets } = res.json() as {
      modules: Array<{ name: string; billable: boolean; internal?: boolean; outputFields: string[]; defaultColumns: unknown[]; category: string; description: string }>;
      presets: Array<{ name: string; modules: string[]; description: string }>;
    };
    expect(modules).toHaveLength(16);
    expect(modules.filter((m) => !m.internal)).toHaveLength(15);
    expect(modules.filter((m) => 'internal' in m).map((m) => [m.name, m.internal])).toEqual([['vehicle-condition', true]]);
    expect(modules.filter((m) => !m.billable).map((m) => m.name).sort()).toEqual(['moderation', 'vehicle-condition']);
    const byName = Object.fromEntries(modules.map((m) => [m.name, m]));
    expect(byName.dating!.outputFields).toEqual(['estimatedDate', 'dateAnchors', 'season', 'holiday']);
    expect(byName.moderation!.outputFields).toEqual(['moderation']);
    expect(byName['vehicle-condition']!.outputFields).toEqual([
      'photos', 'overallCondition', 'observations', 'componentGrades', 'accidentIndicators', 'photoQuality', 'missingViews', 'vehicleContext',
    ]);
    expect(presets.map((p) => p.name).sort()).toEqual(['automobile', 'claims', 'ecommerce', 'full-analysis', 'memorial', 'property', 'quick-scan', 'vehicle-condition']);
    const stacks = Object.fromEntries(presets.map((p) => [p.name, p.modules]));
    expect(stacks['full-analysis']).toEqual([
      'dating', 'people', 'location', 'atmosphere', 'photo-quality', 'entities', 'composition', 'text-content', 'accessibility', 'describe', 'condition', 'authenticity', 'color-palette', 'automobile',
    ]);
    expect(stacks['vehicle-condition']).toEqual(['multi-image', 'multi-image-vehicle', 'vehicle-condition']);
    expect(stacks['quick-scan']).toEqual(['moderation']);
  });
});

describe('GET /v1/usage', () => {
  it('reports pools and reserved amounts by Bearer key', async () => {
    const user = await createTestAccount(t.db, { community: 30, purchased: 100 });
    await reserve(t.db, { id: `res-${user.userId}`, accountId: user.userId, amount: 40, ttlMs: 60_000 });
    const res = await t.app.inject({ method: 'GET', url: '/v1/usage?tier=starter', headers: bearer(user.liveKey) });
    expect(res.statusCode).toBe(200);
    // Community pool spent first: 30 from community, 10 from purchased.
    expect(res.json()).toEqual({ tier: 'starter', community: { balance: 0, monthlyAllowance: 0, resetsInDays: 0 }, purchased: { balance: 90 }, reserved: 40 });
  });

  it('reports any user by x-internal-secret + userId; secret and userId are both required', async () => {
    const user = await createTestAccount(t.db, { community: 5 });
    const ok = await t.app.inject({ method: 'GET', url: `/v1/usage?userId=${user.userId}`, headers: { 'x-internal-secret': INTERNAL_SECRET } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().community.balance).toBe(5);
    const wrong = await t.app.inject({ method: 'GET', url: `/v1/usage?userId=${user.userId}`, headers: { 'x-internal-secret': 'nope' } });
    expect(wrong.statusCode).toBe(401);
    const noUser = await t.app.inject({ method: 'GET', url: '/v1/usage', headers: { 'x-internal-secret': INTERNAL_SECRET } });
    expect(noUser.statusCode).toBe(400);
    expect(expectEnvelope(noUser.json()).message).toContain('userId');
    const unknown = await t.app.inject({ method: 'GET', url: '/v1/usage?userId=usr_nobody', headers: { 'x-internal-secret': INTERNAL_SECRET } });
    expect(unknown.statusCode).toBe(400);
  });

  it('accepts only tier=starter', async () => {
    const user = await createTestAccount(t.db);
    const res = await t.app.inject({ method: 'GET', url: '/v1/usage?tier=growth', headers: bearer(user.liveKey) });
    expect(res.statusCode).toBe(400);
    const internal = await t.app.inject({ method: 'GET', url: `/v1/usage?userId=${user.userId}&tier=pro`, headers: { 'x-internal-secret': INTERNAL_SECRET } });
    expect(internal.statusCode).toBe(400);
  });
});
