import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interactiveTaskQueue, loadConfig } from '../../core/config.ts';
import { createLogger } from '../../core/logger.ts';
import { freePort } from '../../tools/scripts/temporal.ts';
import { simulatorNotice, vendorSetup } from '../../vendors/index.ts';
import { workerRuntimeOptions } from '../../worker/main.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { loadDashboards, metricNamesIn } from '../helpers/dashboards.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { killAll, serviceEnv, spawnService, workerPolling, type ServiceProcess } from '../helpers/processes.ts';

// A real worker process (tsx worker/main.ts) configured as in docker-compose.yml (SDK metrics on,
// vendors from SIM_VENDOR_URL_IF_NO_KEYS) runs one analysis; the SDK core's exporter is scraped.
let p: Pipeline;
let worker: ServiceProcess;
let metricsUrl: string;
beforeAll(async () => {
  p = await startPipeline({ worker: false });
  const address = `127.0.0.1:${await freePort()}`;
  metricsUrl = `http://${address}/metrics`;
  // As docker-compose.yml runs it: no vendor key, the simulator named by SIM_VENDOR_URL_IF_NO_KEYS.
  worker = spawnService(
    'worker/main.ts',
    serviceEnv(p.config, { TEMPORAL_METRICS_BIND_ADDRESS: address, SIM_VENDOR_URL: '', SIM_VENDOR_URL_IF_NO_KEYS: p.sim.url }),
  );
  await workerPolling(worker);
}, 240_000);
afterAll(async () => {
  killAll();
  await p?.close();
});

/** Sample lines of a Prometheus text exposition: name, labels (raw), value. */
function samples(text: string): Array<{ name: string; labels: string; value: number }> {
  return text
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)/.exec(l);
      if (!m) throw new Error(`not a sample line: ${l}`);
      return { name: m[1]!, labels: m[2] ?? '', value: Number(m[3]) };
    });
}

describe('a worker without vendor keys', () => {
  it('says loudly at startup that the simulator answers, and the analysis is labelled simulated', async () => {
    const notice = worker.logLines().find((l) => l.level === 40 && String(l.msg).startsWith('!!! No vendor API key configured'));
    expect(notice?.msg).toBe(
      `!!! No vendor API key configured (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY): analyses are answered by the vendor SIMULATOR at ${p.sim.url}, labelled "simulated", not real AI output.`,
    );
    const calls = p.sim.stats().openai.calls;
    const user = await createTestAccount(p.db, { community: 20 });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageBase64: photoBase64('Nikon_D70.jpg'), modules: ['describe'] },
    });
    expect(res.statusCode).toBe(200);
    expect(p.sim.stats().openai.calls).toBe(calls + 1);
    expect(res.json().warnings).toEqual(expect.arrayContaining([expect.stringMatching(/^simulated: /)]));
  });
});

describe('the worker’s Temporal SDK metrics', () => {
  it('are off unless TEMPORAL_METRICS_BIND_ADDRESS is set, and a bad address is refused', () => {
    const logger = createLogger({ LOG_LEVEL: 'silent' }, 'worker', { write() {} });
    expect(loadConfig({}).TEMPORAL_METRICS_BIND_ADDRESS).toBeUndefined();
    expect(workerRuntimeOptions(loadConfig({}), logger).telemetryOptions).toBeUndefined();
    expect(workerRuntimeOptions(loadConfig({ TEMPORAL_METRICS_BIND_ADDRESS: '0.0.0.0:9464' }), logger).telemetryOptions?.metrics).toMatchObject({
      prometheus: { bindAddress: '0.0.0.0:9464' },
    });
    expect(loadConfig({ TEMPORAL_METRICS_BIND_ADDRESS: '[::]:9464' }).TEMPORAL_METRICS_BIND_ADDRESS).toBe('[::]:9464');
    expect(() => loadConfig({ TEMPORAL_METRICS_BIND_ADDRESS: '9464' })).toThrow(/TEMPORAL_METRICS_BIND_ADDRESS: host:port/);
  });

  it('are served on the bind address once the worker polls, and count the work it did', async () => {
    const scrapeNow = async () => {
      const scrape = await fetch(metricsUrl);
      expect(scrape.status).toBe(200);
      return samples(await scrape.text());
    };
    const sum = (of: ReturnType<typeof samples>, name: string, ...labels: string[]) =>
      of.filter((x) => x.name === name && labels.every((l) => x.labels.includes(l))).reduce((total, x) => total + x.value, 0);
    const before = await scrapeNow();
    const user = await createTestAccount(p.db, { community: 20 });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: bearer(user.liveKey),
      payload: { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating'] },
    });
    expect(res.statusCode).toBe(200);

    const all = await scrapeNow();
    const value = (name: string, ...labels: string[]) => sum(all, name, ...labels);
    const grew = (name: string, ...labels: string[]) => sum(all, name, ...labels) - sum(before, name, ...labels);
    // A single analysis runs on the interactive queue (docs/decisions.md, "Interactive work ahead of batches").
    const queue = `task_queue="${interactiveTaskQueue(p.config)}"`;
    const batchQueue = `task_queue="${p.config.TEMPORAL_TASK_QUEUE}"`;

    // Slots as the worker is configured (maxConcurrentActivityTaskExecutions: 100 on each of its
    // two queues), pollers running on both.
    expect(all.some((x) => x.name === 'temporal_worker_task_slots_available' && x.labels.includes('worker_type="ActivityWorker"'))).toBe(true);
    for (const q of [queue, batchQueue]) {
      expect(value('temporal_worker_task_slots_available', 'worker_type="ActivityWorker"', q) + value('temporal_worker_task_slots_used', 'worker_type="ActivityWorker"', q)).toBe(100);
      expect(value('temporal_num_pollers', 'poller_type="activity_task"', q)).toBeGreaterThan(0);
    }
    // The analysis this test ran: one workflow completed, one vendor activity executed (Prometheus
    // naming: counters end in _total, durations are _seconds histograms).
    expect(grew('temporal_workflow_completed_total', 'workflow_type="analyzeWorkflow"', queue)).toBe(1);
    expect(grew('temporal_activity_execution_latency_seconds_count', 'activity_type="callOpenAI"', queue)).toBe(1);
    expect(grew('temporal_local_activity_execution_latency_seconds_count', 'activity_type="reserveDelta"', queue)).toBe(1);

    // Every temporal_* series the Grafana dashboards query exists in a real worker's scrape.
    const names = new Set(all.map((x) => x.name));
    const queried = loadDashboards().flatMap((d) => d.panels.flatMap((panel) => panel.exprs.flatMap(metricNamesIn).map((name) => ({ name, where: `${d.file}: ${panel.title}` }))));
    const temporal = queried.filter((q) => q.name.startsWith('temporal_'));
    expect(temporal.length).toBeGreaterThan(10);
    expect(temporal.filter((q) => !names.has(q.name))).toEqual([]);
  });
});

describe('SIM_VENDOR_URL_IF_NO_KEYS', () => {
  it('becomes SIM_VENDOR_URL only while no vendor has a key; an explicit SIM_VENDOR_URL stays', () => {
    const sim = 'http://sim-vendor:4010';
    expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: sim }).SIM_VENDOR_URL).toBe(sim);
    expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: sim, OPENAI_API_KEY: '' }).SIM_VENDOR_URL).toBe(sim);
    for (const key of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY']) {
      const config = loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: sim, [key]: 'sk-real' });
      expect(config.SIM_VENDOR_URL).toBeUndefined();
      expect(simulatorNotice(config)).toBeNull();
      // The keyless vendors are skipped, not simulated: a real deployment never gets simulated answers.
      expect(vendorSetup(config).simulated).toEqual([]);
      expect(vendorSetup(config).vendors.map((v) => v.simulated)).toEqual([false]);
    }
    expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: sim, SIM_VENDOR_URL: 'http://127.0.0.1:4010' }).SIM_VENDOR_URL).toBe('http://127.0.0.1:4010');
    expect(loadConfig({}).SIM_VENDOR_URL).toBeUndefined();
    expect(() => loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: 'the simulator' })).toThrow(/SIM_VENDOR_URL_IF_NO_KEYS/);
  });
});
