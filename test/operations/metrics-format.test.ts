import { register as globalRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createApiMetrics } from '../../metrics/api.ts';
import { startMetricsServer } from '../../metrics/server.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';
import { PROMETHEUS_CONTENT_TYPE, sample } from '../helpers/metrics.ts';

/** The lines of an exposition that belong to one metric family (its samples, without comments). */
function family(text: string, name: string): string[] {
  return text.split('\n').filter((l) => /^[a-z_]/.test(l) && (l.startsWith(`${name} `) || l.startsWith(`${name}{`) || l.startsWith(`${name}_`)));
}

/** `# TYPE` lines of the lenstack metrics, as name → type. */
function lenstackTypes(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of text.matchAll(/^# TYPE (lenstack_\S+) (\S+)$/gm)) out[m[1]!] = m[2]!;
  return out;
}

/** The `le` bounds a histogram exposes for one of its series, in order. */
function bounds(text: string, bucketSeriesPrefix: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(bucketSeriesPrefix))
    .map((l) => /le="([^"]+)"/.exec(l)![1]!);
}

describe('Prometheus text exposition of the metric sets we build (prom-client)', () => {
  it('escapes backslash, double quote and line feed in label values', async () => {
    const m = createApiMetrics();
    m.analyses.inc({ outcome: 'failed', code: 'a\\b"c\nd' });
    m.httpRequests.inc({ method: 'GET', route: '/x/"y"\\z\n', status: '404' }, 2);
    const text = await m.registry.metrics();
    expect(text).toContain('\nlenstack_analyses_total{outcome="failed",code="a\\\\b\\"c\\nd"} 1\n');
    expect(text).toContain('\nlenstack_http_requests_total{method="GET",route="/x/\\"y\\"\\\\z\\n",status="404"} 2\n');
    // Nothing unescaped leaks: no raw line feed splits a sample line.
    expect(text.split('\n').filter((l) => l.startsWith('d"'))).toEqual([]);
    expect(text).toContain(
      '# HELP lenstack_http_requests_total HTTP requests answered, by method, route pattern and status code.\n# TYPE lenstack_http_requests_total counter\n',
    );
  });

  it('counts per label set; counters without labels start at 0; counters only go up; labels are fixed', async () => {
    const m = createWorkerMetrics();
    expect(sample(await m.registry.metrics(), 'lenstack_reservations_swept_total')).toBe(0);
    m.vendorCalls.inc({ vendor: 'openai', task: 'lenses' });
    m.vendorCalls.inc({ vendor: 'openai', task: 'lenses' }, 2);
    m.vendorCalls.inc({ vendor: 'google', task: 'lenses' });
    m.credits.inc({ event: 'reserved' }, 0.5);
    m.reservationsSwept.inc({}, 3);
    m.sweeperFailures.inc({});
    const text = await m.registry.metrics();
    expect(family(text, 'lenstack_vendor_calls_total')).toEqual([
      'lenstack_vendor_calls_total{vendor="openai",task="lenses"} 3',
      'lenstack_vendor_calls_total{vendor="google",task="lenses"} 1',
    ]);
    expect(sample(text, 'lenstack_credits_total{event="reserved"}')).toBe(0.5);
    expect(family(text, 'lenstack_reservations_swept_total')).toEqual(['lenstack_reservations_swept_total 3']);
    expect(family(text, 'lenstack_sweeper_failures_total')).toEqual(['lenstack_sweeper_failures_total 1']);
    expect(() => m.vendorCalls.inc({ vendor: 'openai', task: 'lenses' }, -1)).toThrow(/not possible to decrease a counter/);
    // A label the metric was not declared with (say, a user id) is refused, not exposed.
    expect(() => m.vendorCalls.inc({ vendor: 'openai', task: 'lenses', user: 'u1' } as never)).toThrow(/user/);
    expect(sample(await m.registry.metrics(), 'lenstack_vendor_calls_total{vendor="openai",task="lenses"}')).toBe(3);
  });

  it('histograms: cumulative buckets over the declared bounds, then +Inf, _sum and _count', async () => {
    const m = createApiMetrics();
    for (const v of [0.001, 0.005, 0.2, 0.2, 7, 100]) m.httpDuration.observe({ method: 'POST', route: '/v1/analyze' }, v);
    const text = await m.registry.metrics();
    const lines = family(text, 'lenstack_http_request_duration_seconds');
    const l = (le: string, n: number) => `lenstack_http_request_duration_seconds_bucket{le="${le}",method="POST",route="/v1/analyze"} ${n}`;
    expect(lines.slice(0, 14)).toEqual([
      l('0.005', 2),
      l('0.01', 2),
      l('0.025', 2),
      l('0.05', 2),
      l('0.1', 2),
      l('0.25', 4),
      l('0.5', 4),
      l('1', 4),
      l('2.5', 4),
      l('5', 4),
      l('10', 5),
      l('30', 5),
      l('60', 5),
      l('+Inf', 6),
    ]);
    expect(lines).toHaveLength(16);
    expect(sample(text, 'lenstack_http_request_duration_seconds_sum{method="POST",route="/v1/analyze"}')).toBeCloseTo(107.406, 9);
    expect(sample(text, 'lenstack_http_request_duration_seconds_count{method="POST",route="/v1/analyze"}')).toBe(6);
  });

  it('keeps the bucket sets of every histogram', async () => {
    const api = createApiMetrics();
    const worker = createWorkerMetrics();
    api.httpDuration.observe({ method: 'GET', route: '/' }, 1);
    api.workflowDuration.observe({ workflow: 'analyze', outcome: 'succeeded' }, 1);
    worker.vendorDuration.observe({ vendor: 'openai', outcome: 'ok' }, 1);
    const a = await api.registry.metrics();
    const w = await worker.registry.metrics();
    expect(bounds(a, 'lenstack_http_request_duration_seconds_bucket')).toEqual(
      ['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '30', '60', '+Inf'],
    );
    expect(bounds(a, 'lenstack_workflow_duration_seconds_bucket')).toEqual(
      ['0.1', '0.25', '0.5', '1', '2', '5', '10', '20', '30', '60', '120', '300', '600', '+Inf'],
    );
    expect(bounds(w, 'lenstack_vendor_call_duration_seconds_bucket')).toEqual(
      ['0.1', '0.25', '0.5', '1', '2', '5', '10', '20', '30', '60', '120', '+Inf'],
    );
  });

  it("a timer's end observes the elapsed seconds under the end labels and returns them", async () => {
    const m = createWorkerMetrics();
    const end = m.vendorDuration.startTimer();
    const before = performance.now();
    await Promise.resolve();
    const seconds = end({ vendor: 'anthropic', outcome: 'rejected' });
    expect(seconds).toBeGreaterThan(0);
    expect(seconds).toBeLessThanOrEqual((performance.now() - before) / 1000 + 0.001);
    const text = await m.registry.metrics();
    expect(sample(text, 'lenstack_vendor_call_duration_seconds_count{vendor="anthropic",outcome="rejected"}')).toBe(1);
    expect(sample(text, 'lenstack_vendor_call_duration_seconds_sum{vendor="anthropic",outcome="rejected"}')).toBe(seconds);
    expect(sample(text, 'lenstack_vendor_call_duration_seconds_bucket{vendor="anthropic",outcome="rejected",le="0.1"}')).toBe(1);
  });

  it('gauges go both ways', async () => {
    const m = createApiMetrics();
    m.httpInFlight.inc({});
    m.httpInFlight.inc({});
    m.httpInFlight.dec({});
    expect(family(await m.registry.metrics(), 'lenstack_http_requests_in_flight')).toEqual(['lenstack_http_requests_in_flight 1']);
  });

  it('process figures are read at scrape time, under the names the docs give', async () => {
    const m = createWorkerMetrics();
    const text = await m.registry.metrics();
    expect(text).toContain('# TYPE process_resident_memory_bytes gauge\n');
    expect(text).toContain('# TYPE process_cpu_seconds_total counter\n');
    expect(text).toContain('# TYPE nodejs_eventloop_lag_p99_seconds gauge\n');
    expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(10_000_000);
    expect(sample(text, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(1_000_000);
    expect(sample(text, 'nodejs_external_memory_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'process_cpu_seconds_total')).toBeGreaterThanOrEqual(0);
    expect(Number.isFinite(sample(text, 'nodejs_eventloop_lag_p99_seconds'))).toBe(true);
    const started = Date.now() / 1000 - process.uptime();
    expect(Math.abs(sample(text, 'process_start_time_seconds')! - started)).toBeLessThan(5);
  });

  it('each metric set has its own registry: the API and worker sets, and two sets in one process, stay apart', async () => {
    const a1 = createApiMetrics();
    const a2 = createApiMetrics();
    const w = createWorkerMetrics();
    a1.analyses.inc({ outcome: 'analyzed', code: 'OK' }, 4);
    const [t1, t2, tw] = await Promise.all([a1.registry.metrics(), a2.registry.metrics(), w.registry.metrics()]);
    expect(sample(t1, 'lenstack_analyses_total{outcome="analyzed",code="OK"}')).toBe(4);
    expect(sample(t2, 'lenstack_analyses_total{outcome="analyzed",code="OK"}')).toBeUndefined();
    expect(lenstackTypes(t1)).toEqual({
      lenstack_http_requests_total: 'counter',
      lenstack_http_request_duration_seconds: 'histogram',
      lenstack_http_requests_in_flight: 'gauge',
      lenstack_analyses_total: 'counter',
      lenstack_analysis_cpu_milliseconds: 'histogram',
      lenstack_workflows_started_total: 'counter',
      lenstack_workflow_duration_seconds: 'histogram',
      lenstack_request_log_rows_total: 'counter',
    });
    expect(lenstackTypes(tw)).toEqual({
      lenstack_vendor_calls_total: 'counter',
      lenstack_vendor_failures_total: 'counter',
      lenstack_vendor_call_duration_seconds: 'histogram',
      lenstack_vendor_tokens: 'histogram',
      lenstack_activity_cpu_milliseconds: 'histogram',
      lenstack_vendor_budget_wait_seconds: 'histogram',
      lenstack_vendor_throttled_total: 'counter',
      lenstack_credit_reservations_total: 'counter',
      lenstack_credits_total: 'counter',
      lenstack_reservations_swept_total: 'counter',
      lenstack_sweeper_failures_total: 'counter',
      lenstack_blobs_collected_total: 'counter',
      lenstack_blob_bytes_collected_total: 'counter',
      lenstack_work_copies_total: 'counter',
      lenstack_prepared_uploads_total: 'counter',
    });
    expect(await globalRegistry.metrics()).not.toContain('lenstack_');
  });

  it("the worker's listener serves the registry with the 0.0.4 content type; HEAD, other methods and paths", async () => {
    const m = createWorkerMetrics();
    m.credits.inc({ event: 'settled' }, 7);
    const server = await startMetricsServer(m.registry, { host: '127.0.0.1', port: 0 });
    try {
      const res = await fetch(server.url);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(PROMETHEUS_CONTENT_TYPE);
      const body = await res.text();
      expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(body));
      expect(sample(body, 'lenstack_credits_total{event="settled"}')).toBe(7);
      expect(body.endsWith('\n')).toBe(true);
      const head = await fetch(server.url, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe(PROMETHEUS_CONTENT_TYPE);
      expect(await head.text()).toBe('');
      const post = await fetch(server.url, { method: 'POST' });
      expect(post.status).toBe(405);
      expect(post.headers.get('allow')).toBe('GET, HEAD');
      expect((await fetch(server.url.replace('/metrics', '/other'))).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});
