import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createApiMetrics } from '../../metrics/api.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';
import { loadDashboards, metricNamesIn } from '../helpers/dashboards.ts';

// docker-compose.yml's observability profile: the Prometheus config targets the services and ports
// compose gives the API and the workers, and every dashboard panel reads metrics the code registers.
// (The Temporal SDK's temporal_* names are checked against a live worker scrape in
// temporal-sdk-metrics.test.ts.)

const repoFile = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
type Service = { environment?: Record<string, string>; volumes?: string[]; profiles?: string[]; command?: string[]; entrypoint?: string[]; image?: string };
const compose = parse(repoFile('docker-compose.yml'), { merge: true }) as { services: Record<string, Service> };
const prometheus = parse(repoFile('deploy/prometheus/prometheus.yml')) as {
  scrape_configs: Array<{
    job_name: string;
    metrics_path?: string;
    authorization?: { type: string; credentials_file: string };
    static_configs?: Array<{ targets: string[] }>;
    dns_sd_configs?: Array<{ names: string[]; type: string; port: number }>;
  }>;
};
const job = (name: string) => prometheus.scrape_configs.find((j) => j.job_name === name)!;

/** Every series name a registry exposes: histograms add _bucket, _sum and _count. */
async function exposedNames(registry: ReturnType<typeof createApiMetrics>['registry']): Promise<Set<string>> {
  const names = new Set<string>();
  for (const m of await registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(m.name + s);
    if (String(m.type) === 'summary') for (const s of ['_sum', '_count']) names.add(m.name + s);
  }
  return names;
}

describe('the observability profile', () => {
  it('runs Prometheus and Grafana only with --profile observability, with the committed config mounted', () => {
    const { prometheus: prom, grafana } = compose.services;
    expect(prom?.profiles).toEqual(['observability']);
    expect(grafana?.profiles).toEqual(['observability']);
    expect(prom?.volumes).toContain('./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro');
    expect(grafana?.volumes).toEqual(expect.arrayContaining(['./deploy/grafana/provisioning:/etc/grafana/provisioning:ro', './deploy/grafana/dashboards:/etc/grafana/dashboards:ro']));
    const provider = parse(repoFile('deploy/grafana/provisioning/dashboards/lenstack.yml')) as { providers: Array<{ options: { path: string } }> };
    expect(provider.providers[0]!.options.path).toBe('/etc/grafana/dashboards');
    // Every other service runs without a profile: `docker compose up` is the whole product.
    const profiled = Object.entries(compose.services).filter(([, s]) => s.profiles).map(([name]) => name);
    expect(profiled.sort()).toEqual(['grafana', 'prometheus']);
  });

  it('scrapes both API replicas on their port with the internal secret that compose writes for it', () => {
    const api = job('lenstack-api');
    expect(api.static_configs![0]!.targets.sort()).toEqual(['api-2:8080', 'api:8080']);
    for (const service of ['api', 'api-2']) {
      expect(compose.services[service]?.environment?.PORT).toBe('8080');
      // API_METRICS is not set, so the API's default (internal: secret required) holds.
      expect(compose.services[service]?.environment?.API_METRICS).toBeUndefined();
    }
    expect(api.metrics_path).toBe('/metrics');
    expect(api.authorization).toEqual({ type: 'Bearer', credentials_file: '/prometheus/internal-secret' });
    const start = compose.services.prometheus!.command!.join(' ');
    // "$$" is compose's escape: the container's shell sees "$INTERNAL_SECRET".
    expect(start).toContain(`printf '%s' "$$INTERNAL_SECRET" > /prometheus/internal-secret`);
    expect(start).toContain('exec /bin/prometheus --config.file=/etc/prometheus/prometheus.yml');
    expect(compose.services.prometheus!.environment!.INTERNAL_SECRET).toMatch(/^\$\{INTERNAL_SECRET:\?/);
  });

  it('scrapes every worker replica on the ports its two metrics listeners bind', () => {
    const env = compose.services.worker!.environment!;
    expect(env.WORKER_METRICS_HOST).toBe('0.0.0.0');
    expect(job('lenstack-worker').dns_sd_configs).toEqual([{ names: ['worker'], type: 'A', port: Number(env.WORKER_METRICS_PORT), refresh_interval: '15s' }]);
    const [host, port] = env.TEMPORAL_METRICS_BIND_ADDRESS!.split(':');
    expect(host).toBe('0.0.0.0');
    expect(job('temporal-sdk').dns_sd_configs).toEqual([{ names: ['worker'], type: 'A', port: Number(port), refresh_interval: '15s' }]);
  });

  it('every dashboard panel reads metrics the API or the worker registers (or the SDK’s temporal_*), from jobs Prometheus has', async () => {
    const registered = new Set([...(await exposedNames(createApiMetrics().registry)), ...(await exposedNames(createWorkerMetrics().registry))]);
    const jobs = prometheus.scrape_configs.map((j) => j.job_name);
    const dashboards = loadDashboards();
    expect(dashboards.map((d) => d.file)).toEqual(['lenstack.json', 'temporal-sdk.json']);
    expect(new Set(dashboards.map((d) => d.uid)).size).toBe(dashboards.length);
    const datasource = parse(repoFile('deploy/grafana/provisioning/datasources/prometheus.yml')) as { datasources: Array<{ uid: string; url: string }> };
    expect(datasource.datasources[0]).toMatchObject({ uid: 'prometheus', url: 'http://prometheus:9090' });

    const unknown: string[] = [];
    let lenstackNames = 0;
    for (const d of dashboards) {
      for (const panel of d.panels) {
        expect(panel.datasourceUid, `${d.file}: ${panel.title}`).toBe('prometheus');
        expect(panel.exprs.length, `${d.file}: ${panel.title}`).toBeGreaterThan(0);
        for (const expr of panel.exprs) {
          const names = metricNamesIn(expr);
          expect(names.length, `${d.file}: ${panel.title}: ${expr}`).toBeGreaterThan(0);
          for (const name of names) {
            if (name.startsWith('lenstack_')) lenstackNames++;
            const known = registered.has(name) || name.startsWith('temporal_') || name === 'up';
            if (!known) unknown.push(`${d.file}: "${panel.title}": ${name}`);
          }
          for (const m of expr.matchAll(/job=~?"([^"]+)"/g)) {
            const pattern = new RegExp(`^(?:${m[1]})$`);
            expect(jobs.some((j) => pattern.test(j)), `${d.file}: ${panel.title}: job ${m[1]}`).toBe(true);
          }
        }
      }
    }
    expect(unknown).toEqual([]);
    expect(lenstackNames).toBeGreaterThan(10);
    // The Temporal SDK's names stay on their own dashboard.
    for (const panel of dashboards.find((d) => d.file === 'lenstack.json')!.panels) {
      for (const expr of panel.exprs) expect(metricNamesIn(expr).filter((n) => n.startsWith('temporal_'))).toEqual([]);
    }
  });

  it('reads metric names out of PromQL (functions, label names, ranges and keywords are not metrics)', () => {
    expect(metricNamesIn('histogram_quantile(0.95, sum by (le, route) (rate(lenstack_http_request_duration_seconds_bucket{job="a", route=~"/v1/.*"}[5m])))')).toEqual([
      'lenstack_http_request_duration_seconds_bucket',
    ]);
    expect(metricNamesIn('sum(rate(a_total[5m])) / on (instance) group_left sum(b)')).toEqual(['a_total', 'b']);
    expect(metricNamesIn('up')).toEqual(['up']);
    expect(metricNamesIn('rate(x[5m]) offset 1h > bool 0')).toEqual(['x']);
  });
});
