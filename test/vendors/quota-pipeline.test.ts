import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { VendorBudget, vendorBudgetFromConfig } from '../../vendors/budget.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { sample } from '../helpers/metrics.ts';
import { DISTINCT_PHOTOS, photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { testConfig } from '../harness/env.ts';

/**
 * The vendor budget where every vendor call passes (activities/vendors.ts), through the real
 * pipeline: a worker, Temporal, the SDKs against the simulator enforcing a vendor's limit.
 * docs/decisions.md, "Vendor quotas".
 */

const analyze = (p: Pipeline, key: string, photo: string) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: photoBase64(photo), modules: ['dating'] } });

describe('a 429 with Retry-After from the vendor', () => {
  let p: Pipeline;
  let budget: VendorBudget;
  beforeAll(async () => {
    // The deployment does not know openai's limit (no OPENAI_RPM): only the vendor's 429 teaches it.
    p = await startPipeline({ config: { VENDOR_ORDER: 'openai,anthropic', VENDOR_OVERFLOW: 'true' } });
    budget = await vendorBudgetFromConfig(p.config);
  }, 120_000);
  afterAll(async () => {
    await budget?.close();
    await p?.close();
  });

  it('pauses and shrinks the shared budget at once: one 429, then the overflow goes to the next vendor without asking openai again; every credit settled', async () => {
    p.sim.reset();
    p.sim.setLimits('openai', { rpm: 3 });
    const user = await createTestAccount(p.db, { community: 100 });
    const vendors: string[] = [];
    for (const photo of DISTINCT_PHOTOS.slice(0, 6)) {
      const res = await analyze(p, user.liveKey, photo);
      expect(res.statusCode, res.body).toBe(200);
      vendors.push(res.json().meta.vendor);
    }
    // Three fit openai's minute; the fourth met its 429 and went to anthropic (VENDOR_OVERFLOW);
    // the fifth and sixth found openai's budget paused for the Retry-After and did not try it.
    expect(vendors).toEqual(['openai', 'openai', 'openai', 'anthropic', 'anthropic', 'anthropic']);
    const stats = p.sim.stats();
    expect(stats.openai).toMatchObject({ succeeded: 3, rateLimited: 1 });
    expect(stats.anthropic.succeeded).toBe(3);
    const state = await budget.state('openai');
    expect(state.factor).toBeCloseTo(0.7, 5);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 94, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
  }, 120_000);
});

describe('the lanes', () => {
  let p: Pipeline;
  beforeAll(async () => {
    // Keys of its own: the budget above is still paused for openai's Retry-After (it is shared by every worker on the prefix).
    p = await startPipeline({ config: { VENDOR_ORDER: 'openai', OPENAI_RPM: 600, REDIS_PREFIX: `${testConfig().REDIS_PREFIX}lanes:` } });
  }, 120_000);
  afterAll(async () => p?.close());

  it("a batch's photos take their slots in the batch lane, an analysis in the interactive lane", async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/batches',
      headers: bearer(user.liveKey),
      payload: { modules: ['dating'], items: DISTINCT_PHOTOS.slice(0, 3).map((f) => ({ base64: photoBase64(f), name: f })) },
    });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id as string;
    await expect
      .poll(async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json().status, { timeout: 90_000, interval: 200 })
      .toBe('completed');
    const single = await analyze(p, user.liveKey, DISTINCT_PHOTOS[5]!);
    expect(single.statusCode, single.body).toBe(200);
    const text = await p.worker!.metrics.registry.metrics();
    expect(sample(text, 'lenstack_vendor_budget_wait_seconds_count{vendor="openai",lane="batch"}')).toBe(3);
    expect(sample(text, 'lenstack_vendor_budget_wait_seconds_count{vendor="openai",lane="interactive"}')).toBe(1);
    expect(p.sim.stats().openai.succeeded).toBe(4);
  }, 120_000);
});

describe('a call with no slot and no overflow', () => {
  let p: Pipeline;
  let budget: VendorBudget;
  beforeAll(async () => {
    // 60 s runs with two vendors: each attempt 2.5 s (workflows/deadlines.ts), so half of it, 1.25 s, for the budget's wait.
    p = await startPipeline({ config: { VENDOR_ORDER: 'openai,anthropic', WORKFLOW_TIMEOUT_MS: 60_000, REDIS_PREFIX: `${testConfig().REDIS_PREFIX}wait:` } });
    budget = await vendorBudgetFromConfig(p.config);
  }, 120_000);
  afterAll(async () => {
    await budget?.close();
    await p?.close();
  });

  it('waits for its own vendor past several attempts (the second vendor is not asked), then is answered by it', async () => {
    p.sim.reset();
    const user = await createTestAccount(p.db, { community: 100 });
    // Another worker met a 429 asking for 5 s: every worker waits that long for openai.
    const grantedAt = Date.now();
    await budget.throttled('openai', { retryAfterMs: 5000, grantedAt });
    const answered = analyze(p, user.liveKey, DISTINCT_PHOTOS[0]!);
    const quotaWaits = async () => sample(await p.worker!.metrics.registry.metrics(), 'lenstack_vendor_failures_total{vendor="openai",task="lenses",kind="quota_wait"}') ?? 0;
    // On a loaded machine the first attempt can come after 5 s: the same 429 (a call granted before
    // the cut, so the budget shrinks once) keeps the pause going until three attempts gave up on it.
    await expect
      .poll(async () => {
        await budget.throttled('openai', { retryAfterMs: 3000, grantedAt: grantedAt - 1 });
        return quotaWaits();
      }, { timeout: 60_000, interval: 500 })
      .toBeGreaterThanOrEqual(3);
    const res = await answered;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().meta.vendor).toBe('openai');
    expect(p.sim.stats().anthropic.calls).toBe(0);
    // Each attempt gave up after 1.25 s without calling the vendor; the workflow asked again.
    expect(await quotaWaits()).toBeGreaterThanOrEqual(3);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 99, reserved: 0 });
  }, 120_000);

  it('gives up inside its run when the pause outlasts it: 502 PROVIDER_UNAVAILABLE, nothing charged, nothing held', async () => {
    p.sim.reset();
    const user = await createTestAccount(p.db, { community: 100 });
    await budget.throttled('openai', { retryAfterMs: 120_000, grantedAt: Date.now() });
    const res = await analyze(p, user.liveKey, DISTINCT_PHOTOS[1]!);
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().error.code).toBe('PROVIDER_UNAVAILABLE');
    expect(p.sim.stats().openai.calls + p.sim.stats().anthropic.calls).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
  }, 120_000);
});

describe('overflow with every vendor out of budget', () => {
  let p: Pipeline;
  let budget: VendorBudget;
  beforeAll(async () => {
    p = await startPipeline({ config: { VENDOR_ORDER: 'openai,anthropic', VENDOR_OVERFLOW: 'true', WORKFLOW_TIMEOUT_MS: 60_000, REDIS_PREFIX: `${testConfig().REDIS_PREFIX}both:` } });
    budget = await vendorBudgetFromConfig(p.config);
  }, 120_000);
  afterAll(async () => {
    await budget?.close();
    await p?.close();
  });

  it('after one round of refusals each attempt waits its share for a slot (no round after round of instant refusals), then 502 inside the run, nothing held', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    for (const v of ['openai', 'anthropic'] as const) await budget.throttled(v, { retryAfterMs: 120_000, grantedAt: Date.now() });
    const res = await analyze(p, user.liveKey, DISTINCT_PHOTOS[2]!);
    expect(res.statusCode, res.body).toBe(502);
    const text = await p.worker!.metrics.registry.metrics();
    const waits = ['openai', 'anthropic'].map((v) => sample(text, `lenstack_vendor_failures_total{vendor="${v}",task="lenses",kind="quota_wait"}`) ?? 0);
    // About 37 s of the 60 s run at 1.25 s an attempt after the first round: some thirty, not hundreds.
    expect(waits[0]! + waits[1]!).toBeGreaterThanOrEqual(4);
    expect(waits[0]! + waits[1]!).toBeLessThan(60);
    expect(p.sim.stats().openai.calls + p.sim.stats().anthropic.calls).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100, reserved: 0 });
  }, 120_000);
});
