import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance, reserve } from '../../credits/ledger.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';
import { sweepOnce } from '../../worker/sweeper.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, INTERNAL_SECRET } from '../helpers/app.ts';
import { PROMETHEUS_CONTENT_TYPE, sample } from '../helpers/metrics.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

describe('GET /metrics on the API port', () => {
  it('API_METRICS=internal (default): 401 envelope without the internal secret; x-internal-secret or Bearer <secret> get the text format', async () => {
    const t = await buildTestApp();
    try {
      const none = await t.app.inject({ method: 'GET', url: '/metrics' });
      expect(none.statusCode).toBe(401);
      expect(expectEnvelope(none.json()).code).toBe('AUTH_FAILED');
      const wrong = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${INTERNAL_SECRET}x` } });
      expect(wrong.statusCode).toBe(401);

      const viaHeader = await t.app.inject({ method: 'GET', url: '/metrics', headers: { 'x-internal-secret': INTERNAL_SECRET } });
      expect(viaHeader.statusCode).toBe(200);
      expect(viaHeader.headers['content-type']).toBe(PROMETHEUS_CONTENT_TYPE);
      expect(viaHeader.body).toContain('# TYPE lenstack_http_requests_total counter');
      // The two refusals above were counted under the route pattern.
      expect(sample(viaHeader.body, 'lenstack_http_requests_total{method="GET",route="/metrics",status="401"}')).toBe(2);
      expect(sample(viaHeader.body, 'process_resident_memory_bytes')).toBeGreaterThan(10_000_000);

      const viaBearer = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${INTERNAL_SECRET}` } });
      expect(viaBearer.statusCode).toBe(200);
      expect(sample(viaBearer.body, 'lenstack_http_requests_total{method="GET",route="/metrics",status="200"}')).toBe(1);
      // The same Authorization parser as API keys (auth/authenticate.ts bearerToken): one space-separated token.
      const tab = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer\t${INTERNAL_SECRET}` } });
      expect(tab.statusCode).toBe(401);
    } finally {
      await t.close();
    }
  });

  it('API_METRICS=public answers anyone; API_METRICS=off has no such route (404 envelope)', async () => {
    const open = await buildTestApp({ config: { API_METRICS: 'public' } });
    const off = await buildTestApp({ config: { API_METRICS: 'off' } });
    try {
      const res = await open.app.inject({ method: 'GET', url: '/metrics' });
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain('# TYPE lenstack_workflow_duration_seconds histogram');
      const gone = await off.app.inject({ method: 'GET', url: '/metrics', headers: { 'x-internal-secret': INTERNAL_SECRET } });
      expect(gone.statusCode).toBe(404);
      expect(expectEnvelope(gone.json()).code).toBe('NOT_FOUND');
      // Not part of the public contract: absent from the OpenAPI document.
      const doc = (await open.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
      expect(doc.paths['/metrics']).toBeUndefined();
    } finally {
      await open.close();
      await off.close();
    }
  });
});

describe('what the API and the worker count', () => {
  let p: Pipeline;
  const apiScrape = async () => (await p.app.inject({ method: 'GET', url: '/metrics', headers: { 'x-internal-secret': INTERNAL_SECRET } })).body;
  beforeAll(async () => {
    p = await startPipeline({ config: { WORKER_METRICS_PORT: 0, VENDOR_ORDER: 'openai,anthropic' } });
  }, 120_000);
  afterAll(async () => {
    await p?.close();
  });

  it('requests by route pattern and status, analyses by outcome, workflow latency, vendor calls and failures, credits moved', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const image = photoBase64('gps-DSCN0021.jpg');
    const post = (key: string, payload: unknown) => p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: payload as object });

    const fresh = await post(user.liveKey, { imageBase64: image, modules: ['dating', 'describe'] });
    expect(fresh.statusCode, fresh.body).toBe(200);
    expect(fresh.json().usage.creditsCharged).toBe(2);
    const hit = await post(user.liveKey, { imageBase64: image, modules: ['dating', 'describe'] });
    expect(hit.json().meta.cacheHit).toBe(true);
    const sandbox = await post(user.testKey, { imageBase64: image, modules: ['dating'] });
    expect(sandbox.json().meta.provider).toBe('sandbox');
    expect((await post(`svc_live_${'x'.repeat(40)}`, { imageBase64: image })).statusCode).toBe(401);
    expect((await post(user.liveKey, { imageBase64: image, modules: ['no-such-lens'] })).statusCode).toBe(400);
    // OpenAI refuses (not retryable): the call falls back to Anthropic.
    p.sim.setBehaviour('openai', { failRate: 1, failure: 'http400' });
    const fellBack = await post(user.liveKey, { imageBase64: image, modules: ['location'] });
    p.sim.setBehaviour('openai', { failRate: 0 });
    expect(fellBack.statusCode, fellBack.body).toBe(200);
    expect(fellBack.json().meta.vendor).toBe('anthropic');
    expect((await p.app.inject({ method: 'GET', url: `/v1/no-such-thing/${user.userId}` })).statusCode).toBe(404);

    const api = (await p.app.inject({ method: 'GET', url: '/metrics', headers: { 'x-internal-secret': INTERNAL_SECRET } })).body;
    expect(sample(api, 'lenstack_http_requests_total{method="POST",route="/v1/analyze",status="200"}')).toBe(4);
    expect(sample(api, 'lenstack_http_requests_total{method="POST",route="/v1/analyze",status="401"}')).toBe(1);
    expect(sample(api, 'lenstack_http_requests_total{method="POST",route="/v1/analyze",status="400"}')).toBe(1);
    expect(sample(api, 'lenstack_http_requests_total{method="GET",route="unmatched",status="404"}')).toBe(1);
    expect(sample(api, 'lenstack_http_request_duration_seconds_count{method="POST",route="/v1/analyze"}')).toBe(6);
    expect(sample(api, 'lenstack_http_requests_in_flight')).toBe(1); // this scrape
    expect(sample(api, 'lenstack_analyses_total{outcome="analyzed",code="OK"}')).toBe(2);
    expect(sample(api, 'lenstack_analyses_total{outcome="cache_hit",code="OK"}')).toBe(1);
    expect(sample(api, 'lenstack_analyses_total{outcome="sandbox",code="OK"}')).toBe(1);
    expect(sample(api, 'lenstack_analyses_total{outcome="failed",code="AUTH_FAILED"}')).toBe(1);
    expect(sample(api, 'lenstack_analyses_total{outcome="failed",code="VALIDATION_FAILED"}')).toBe(1);
    expect(sample(api, 'lenstack_workflows_started_total{workflow="analyze",start="new"}')).toBe(2);
    expect(sample(api, 'lenstack_workflow_duration_seconds_count{workflow="analyze",outcome="succeeded"}')).toBe(2);
    expect(sample(api, 'lenstack_workflow_duration_seconds_bucket{workflow="analyze",outcome="succeeded",le="+Inf"}')).toBe(2);
    // Low cardinality: no URL, user id or key ever becomes a label.
    expect(api).not.toContain(user.userId);
    expect(api).not.toContain('/v1/no-such-thing');
    expect(api).not.toContain(user.liveKey);

    const res = await fetch(p.worker!.metricsUrl!);
    expect(res.headers.get('content-type')).toBe(PROMETHEUS_CONTENT_TYPE);
    const worker = await res.text();
    expect(sample(worker, 'lenstack_vendor_calls_total{vendor="openai",task="lenses"}')).toBe(2);
    expect(sample(worker, 'lenstack_vendor_calls_total{vendor="anthropic",task="lenses"}')).toBe(1);
    expect(sample(worker, 'lenstack_vendor_failures_total{vendor="openai",task="lenses",kind="rejected"}')).toBe(1);
    expect(sample(worker, 'lenstack_vendor_call_duration_seconds_count{vendor="openai",outcome="ok"}')).toBe(1);
    expect(sample(worker, 'lenstack_credit_reservations_total{event="reserved"}')).toBe(2);
    expect(sample(worker, 'lenstack_credit_reservations_total{event="settled"}')).toBe(2);
    expect(sample(worker, 'lenstack_credits_total{event="reserved"}')).toBe(3);
    expect(sample(worker, 'lenstack_credits_total{event="settled"}')).toBe(3);
    expect(sample(worker, 'lenstack_credits_total{event="refunded"}')).toBe(0);
    expect(worker).not.toContain(user.userId);
    expect((await fetch(p.worker!.metricsUrl!.replace('/metrics', '/other'))).status).toBe(404);
  });

  it('a failed analysis releases its credits and says so: released count and amount', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const before = await (await fetch(p.worker!.metricsUrl!)).text();
    p.sim.setBehaviour('all', { failRate: 1, failure: 'http400' });
    const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageBase64: photoBase64('gps-DSCN0010.jpg'), modules: ['dating', 'people', 'describe'] } });
    p.sim.setBehaviour('all', { failRate: 0 });
    expect(res.statusCode).toBe(502);
    expect(expectEnvelope(res.json()).code).toBe('PROVIDER_ERROR');
    const after = await (await fetch(p.worker!.metricsUrl!)).text();
    const delta = (s: string) => (sample(after, s) ?? 0) - (sample(before, s) ?? 0);
    expect(delta('lenstack_credit_reservations_total{event="released"}')).toBe(1);
    expect(delta('lenstack_credits_total{event="released"}')).toBe(3);
    expect(delta('lenstack_vendor_failures_total{vendor="anthropic",task="lenses",kind="rejected"}')).toBe(1);
    const api = (await p.app.inject({ method: 'GET', url: '/metrics', headers: { 'x-internal-secret': INTERNAL_SECRET } })).body;
    expect(sample(api, 'lenstack_analyses_total{outcome="failed",code="PROVIDER_ERROR"}')).toBe(1);
    expect(sample(api, 'lenstack_workflow_duration_seconds_count{workflow="analyze",outcome="failed"}')).toBe(1);
  });

  it('what a photo costs: vendor tokens per call by vendor, model and stack, the second photo\'s cached input, CPU ms in the API and the worker; the credits are the same either way', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const before = { api: await apiScrape(), worker: await (await fetch(p.worker!.metricsUrl!)).text() };
    const sha256s: string[] = [];
    const charged: number[] = [];
    for (const name of ['gps-DSCN0010.jpg', 'Canon_40D.jpg']) {
      const imageBase64 = photoBase64(name);
      const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageBase64, preset: 'full-analysis' } });
      expect(res.statusCode, res.body).toBe(200);
      charged.push(res.json().usage.creditsCharged);
      sha256s.push(createHash('sha256').update(Buffer.from(imageBase64, 'base64')).digest('hex'));
    }
    // The vendor bills the second photo's prefix at the cached rate; the customer pays per lens.
    expect(charged[1]).toBe(charged[0]);
    expect(charged[0]).toBeGreaterThan(10);
    const last = p.sim.stats().openai.last!;
    expect(last.cachedTokens).toBeGreaterThan(1024);

    const after = { api: await apiScrape(), worker: await (await fetch(p.worker!.metricsUrl!)).text() };
    const delta = (which: 'api' | 'worker', s: string) => (sample(after[which], s) ?? 0) - (sample(before[which], s) ?? 0);
    const series = (kind: string, part: 'count' | 'sum') =>
      `lenstack_vendor_tokens_${part}{vendor="openai",model="${p.config.OPENAI_MODEL}",task="lenses",stack="full-analysis",kind="${kind}"}`;
    expect(delta('worker', series('input', 'count'))).toBe(2);
    expect(delta('worker', series('cached_input', 'count'))).toBe(2);
    // The first photo cached nothing, the second what the vendor said.
    expect(delta('worker', series('cached_input', 'sum'))).toBe(last.cachedTokens);
    expect(delta('worker', series('input', 'sum'))).toBeGreaterThan(2 * last.cachedTokens);
    expect(delta('worker', series('output', 'sum'))).toBeGreaterThan(0);
    expect(delta('worker', series('cache_write_input', 'sum'))).toBe(0);
    // CPU: each analyze request in the API, each activity (reserve, vendor call, persist) in the worker.
    expect(delta('api', 'lenstack_analysis_cpu_milliseconds_count{outcome="analyzed"}')).toBe(2);
    expect(delta('api', 'lenstack_analysis_cpu_milliseconds_sum{outcome="analyzed"}')).toBeGreaterThan(0);
    expect(delta('worker', 'lenstack_activity_cpu_milliseconds_count{activity="callOpenAI"}')).toBe(2);
    expect(delta('worker', 'lenstack_activity_cpu_milliseconds_sum{activity="callOpenAI"}')).toBeGreaterThan(0);
    expect(delta('worker', 'lenstack_activity_cpu_milliseconds_count{activity="persistAndSettle"}')).toBe(2);
    for (const text of [after.api, after.worker]) {
      for (const leak of [user.userId, ...sha256s]) expect(text).not.toContain(leak);
    }
  });

  it('an answer the worker refuses (not JSON) was billed by the vendor: its tokens are counted like a kept answer\'s', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const before = await (await fetch(p.worker!.metricsUrl!)).text();
    const callsBefore = p.sim.stats().openai.calls;
    p.sim.setBehaviour('openai', { failRate: 1, failure: 'invalid-json' });
    let res;
    try {
      res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating'] } });
    } finally {
      p.sim.setBehaviour('openai', { failRate: 0 });
    }
    // The next vendor answers; the refused answer's tokens are the vendor's bill all the same.
    expect(res.statusCode, res.body).toBe(200);
    expect(p.sim.stats().openai.calls - callsBefore).toBe(1);
    const refused = p.sim.stats().openai.last!;
    expect(refused.outcome).toBe('invalid-json');
    const after = await (await fetch(p.worker!.metricsUrl!)).text();
    const delta = (s: string) => (sample(after, s) ?? 0) - (sample(before, s) ?? 0);
    const series = (kind: string, part: 'count' | 'sum') => `lenstack_vendor_tokens_${part}{vendor="openai",model="${p.config.OPENAI_MODEL}",task="lenses",stack="none",kind="${kind}"}`;
    expect(delta(series('input', 'count'))).toBe(1);
    expect(delta(series('input', 'sum'))).toBe(refused.inputTokens);
    expect(delta(series('output', 'sum'))).toBe(refused.outputTokens);
    expect(refused.outputTokens).toBeGreaterThan(0);
  });

  it('the sweeper counts the reservations it releases and their credits', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const metrics = createWorkerMetrics();
    const logs: string[] = [];
    await reserve(p.db, { id: `res:test-sweep:${user.userId}`, accountId: user.userId, amount: 4, ttlMs: 0, workflowId: 'terminated-by-hand' });
    const ids = await sweepOnce(p.db, metrics, (m) => logs.push(m));
    expect(ids).toContain(`res:test-sweep:${user.userId}`);
    const scrape = await metrics.registry.metrics();
    expect(sample(scrape, 'lenstack_reservations_swept_total')).toBe(ids.length);
    expect(sample(scrape, 'lenstack_credit_reservations_total{event="swept"}')).toBe(ids.length);
    expect(sample(scrape, 'lenstack_credits_total{event="swept"}')).toBeGreaterThanOrEqual(4); // nothing persisted: all returned
    expect(logs.join('\n')).toContain(`res:test-sweep:${user.userId}`);
    expect(scrape).toContain(`\nlenstack_reservations_swept_total ${ids.length}\n`);
  });

  it('a swept run that had persisted its analysis is charged for it: swept_charged', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const workflowId = `analyze:${user.userId}:req-swept-persisted`;
    const reservationId = `res:${workflowId}`;
    await reserve(p.db, { id: reservationId, accountId: user.userId, amount: 5, ttlMs: 0, workflowId });
    await p.db.query(`INSERT INTO analysis_runs (workflow_id, user_id, request_id, image_count, credits) VALUES ($1, $2, 'req-swept-persisted', 1, 3)`, [workflowId, user.userId]);
    const metrics = createWorkerMetrics();
    const ids = await sweepOnce(p.db, metrics, () => {});
    expect(ids).toContain(reservationId);
    // This pass may have closed other files' expired reservations too: at least ours is counted.
    const scrape = await metrics.registry.metrics();
    expect(sample(scrape, 'lenstack_credits_total{event="swept_charged"}')).toBeGreaterThanOrEqual(3);
    expect(sample(scrape, 'lenstack_credits_total{event="swept"}')).toBeGreaterThanOrEqual(2);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 17, reserved: 0 });
  });
});
