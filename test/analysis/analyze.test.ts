import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getBalance, checkInvariants } from '../../credits/ledger.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());
beforeEach(() => p.sim.reset());

const analyze = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(key), ...headers }, payload: body });

const FULL = 14;

describe('POST /v1/analyze — delta billing', () => {
  it('full-analysis bills 14 on a new photo and 0 on the repeat, which is a cache hit', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const img = photoBase64('Canon_40D.jpg');
    const first = await analyze(user.liveKey, { imageBase64: img, preset: 'full-analysis', options: { includeFingerprint: true } });
    expect(first.statusCode, first.body).toBe(200);
    const a = first.json();
    expect(a).toMatchObject({ object: 'analysis', outputSchema: 'photo', meta: { ai_generated: true, cacheHit: false } });
    expect(a.usage.creditsCharged).toBe(FULL);
    expect(a.usage.modulesUsed).toHaveLength(15);
    expect(a.usage.modulesUsed).toContain('moderation');
    expect(a.usage.inputTokens).toBeGreaterThan(0);
    expect(a.usage.totalTokens).toBe(a.usage.inputTokens + a.usage.outputTokens);
    expect(a.output).toHaveProperty('estimatedDate');
    expect(a.output).toHaveProperty('moderation');
    expect(['openai', 'anthropic', 'google']).toContain(a.meta.vendor);
    expect(a.meta.provider).toContain('simulated');
    expect(a.warnings.join(' ')).toContain('simulated');
    expect(a.meta.promptHash).toMatch(/^[0-9a-f]{64}$/);
    expect(a.fingerprint.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(a.fingerprint.pHash).toMatch(/^[0-9a-f]{16}$/);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - FULL, reserved: 0 });
    expect(p.sim.stats()[a.meta.vendor as 'openai'].calls).toBe(1);

    const again = await analyze(user.liveKey, { imageBase64: img, preset: 'full-analysis', options: { includeFingerprint: true } });
    expect(again.statusCode).toBe(200);
    const b = again.json();
    expect(b.meta.cacheHit).toBe(true);
    expect(b.usage).toMatchObject({ creditsCharged: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0 });
    expect(b.output).toEqual(a.output);
    expect(b.fingerprint).toEqual(a.fingerprint);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - FULL, reserved: 0 });
    const photo = await p.db.query('SELECT analyze_call_count, total_credits_spent FROM photos WHERE user_id = $1', [user.userId]);
    expect(photo.rows).toEqual([{ analyze_call_count: 2, total_credits_spent: FULL }]);
  });

  it('quick-scan bills 0 and still runs moderation', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await analyze(user.liveKey, { imageBase64: photoBase64('Nikon_D70.jpg'), preset: 'quick-scan' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().usage).toMatchObject({ creditsCharged: 0, modulesUsed: ['moderation'] });
    expect(res.json().output).toHaveProperty('moderation');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
  });

  it('adding one lens to an analyzed photo bills exactly 1; refresh bills every requested lens again', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const img = photoBase64('Pentax_K10D.jpg');
    const r1 = await analyze(user.liveKey, { imageBase64: img, modules: ['dating', 'describe'] });
    expect(r1.json().usage.creditsCharged).toBe(2);
    const r2 = await analyze(user.liveKey, { imageBase64: img, modules: ['dating', 'describe'], modulesAdd: ['people'] });
    expect(r2.statusCode, r2.body).toBe(200);
    expect(r2.json().usage.creditsCharged).toBe(1);
    expect(r2.json().meta.cacheHit).toBe(false);
    expect(r2.json().output).toHaveProperty('estimatedDate');
    const r3 = await analyze(user.liveKey, { imageBase64: img, modules: ['dating', 'describe', 'people'], refresh: true });
    expect(r3.json().usage.creditsCharged).toBe(3);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - 6, reserved: 0 });
    const events = await p.db.query(`SELECT lens, count(*)::int AS n FROM lens_events WHERE user_id = $1 GROUP BY lens ORDER BY lens`, [user.userId]);
    expect(events.rows).toEqual([
      { lens: 'dating', n: 2 },
      { lens: 'describe', n: 2 },
      { lens: 'moderation', n: 2 },
      { lens: 'people', n: 2 },
    ]);
  });

  it('two photos bill per photo and answer per image in output.images', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const res = await analyze(user.liveKey, {
      images: [{ base64: photoBase64('gps-DSCN0010.jpg') }, { base64: photoBase64('gps-DSCN0012.jpg') }],
      modules: ['location', 'dating'],
    });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    expect(a.usage.creditsCharged).toBe(4);
    expect(a.output.images).toHaveLength(2);
    expect(a.output.images.map((i: { index: number; creditsCharged: number }) => [i.index, i.creditsCharged])).toEqual([[0, 2], [1, 2]]);
    expect(a.output.images[0].sha256).not.toBe(a.output.images[1].sha256);
    expect(a.output.images[0]).toHaveProperty('estimatedDate');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 96, reserved: 0 });
  });

  it('402 with the exact credits object and no-store header when short; nothing moves', async () => {
    const user = await createTestAccount(p.db, { community: 3, purchased: 2 });
    const res = await analyze(user.liveKey, { imageBase64: photoBase64('hdr-canon_hdr_NO.jpg'), preset: 'full-analysis' });
    expect(res.statusCode).toBe(402);
    expect(res.headers['cache-control']).toBe('no-store, private');
    const e = expectEnvelope(res.json());
    expect(e.code).toBe('PLAN_LIMIT_EXCEEDED');
    expect(e.credits).toEqual({ needed: 14, community: 3, purchased: 2, total: 5, resetsInDays: 0 });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 3, purchased: 2, reserved: 0 });
    const photos = await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId]);
    expect(photos.rows[0].n).toBe(0);
    expect(p.sim.stats().openai.calls + p.sim.stats().anthropic.calls + p.sim.stats().google.calls).toBe(0);
  });
});

describe('POST /v1/analyze — options', () => {
  it('includeEmbedding returns the 192-d local visual embedding, the same on the cache hit; absent when not asked', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const img = photoBase64('gps-DSCN0021.jpg');
    const plain = await analyze(user.liveKey, { imageBase64: img, modules: ['describe'] });
    expect(plain.json()).not.toHaveProperty('embedding');
    expect(plain.json()).not.toHaveProperty('fingerprint');
    const a = await analyze(user.liveKey, { imageBase64: img, modules: ['describe', 'dating'], options: { includeEmbedding: true } });
    expect(a.statusCode, a.body).toBe(200);
    const e: number[] = a.json().embedding;
    expect(e).toHaveLength(192);
    expect(Math.hypot(...e)).toBeCloseTo(1, 3);
    const hit = await analyze(user.liveKey, { imageBase64: img, modules: ['describe', 'dating'], options: { includeEmbedding: true } });
    expect(hit.json().meta.cacheHit).toBe(true);
    expect(hit.json().embedding).toEqual(e);
  });
});

describe('POST /v1/analyze — vendor fallback', () => {
  it('first vendor down → the second answers, billed once, with a warning', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    p.sim.setBehaviour('openai', { failRate: 1, failure: 'http500' });
    const res = await analyze(user.liveKey, { imageBase64: photoBase64('orientation-landscape_1.jpg'), modules: ['describe'] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().meta.vendor).toBe('anthropic');
    expect(res.json().warnings.join(' ')).toContain('openai failed');
    // Bounded retries on the failing vendor, then fallback.
    expect(p.sim.stats().openai.calls).toBe(3);
    expect(p.sim.stats().anthropic.calls).toBe(1);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
  });

  it('schema-invalid JSON counts as a vendor failure and falls back without retrying that vendor', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    p.sim.setBehaviour('openai', { failRate: 1, failure: 'schema-invalid' });
    const res = await analyze(user.liveKey, { imageBase64: photoBase64('orientation-landscape_6.jpg'), modules: ['describe'] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().meta.vendor).toBe('anthropic');
    expect(p.sim.stats().openai.calls).toBe(1);
  });

  it('all vendors down → 502 PROVIDER_UNAVAILABLE, credits released, nothing persisted', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http500' });
    const res = await analyze(user.liveKey, { imageBase64: photoBase64('orientation-portrait_8.jpg'), modules: ['describe', 'dating'] });
    expect(res.statusCode).toBe(502);
    const e = expectEnvelope(res.json());
    expect(e).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', retryable: true });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    const ledger = await p.db.query(`SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id`, [user.userId]);
    expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'release']);
    const photos = await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId]);
    expect(photos.rows[0].n).toBe(0);
    expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
  });

  it("a vendor's explicit error on every vendor → 502 PROVIDER_ERROR", async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http400' });
    const res = await analyze(user.liveKey, { imageBase64: photoBase64('mobile-jolla.jpg'), modules: ['describe'] });
    expect(res.statusCode).toBe(502);
    expect(expectEnvelope(res.json()).code).toBe('PROVIDER_ERROR');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
  });
});

describe('POST /v1/analyze — sandbox and idempotency', () => {
  it('a svc_test_ key gets fixtures instantly: no vendor, no workflow, nothing billed or stored', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await analyze(user.testKey, { imageBase64: photoBase64('Canon_40D.jpg'), preset: 'full-analysis' });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    expect(a.usage.creditsCharged).toBe(0);
    expect(a.meta.provider).toBe('sandbox');
    expect(a.output).toHaveProperty('estimatedDate');
    expect(p.sim.stats().openai.calls).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    const photos = await p.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId]);
    expect(photos.rows[0].n).toBe(0);
  });

  it('the same x-request-id twice runs and bills once', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const body = { imageBase64: photoBase64('xmp-BlueSquare.jpg'), modules: ['describe', 'dating'] };
    const [a, b] = await Promise.all([
      analyze(user.liveKey, body, { 'x-request-id': `idem-${user.userId}` }),
      analyze(user.liveKey, body, { 'x-request-id': `idem-${user.userId}` }),
    ]);
    expect([a.statusCode, b.statusCode]).toEqual([200, 200]);
    expect(a.json().usage.creditsCharged).toBe(2);
    expect(b.json().usage.creditsCharged).toBe(2);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 8, reserved: 0 });
  });
});
