/**
 * Loaded into the CLI's own process by bench/cli-memory.ts (`node --import bench/cli-memory-probe.ts
 * clients/cli/bin/lenstack.js …`; Node strips the types itself, no loader): samples
 * process.memoryUsage() and the heap V8 holds (v8 total_physical_size) every 10 ms, and the heap
 * in use just after each full (mark-compact)
 * collection the CLI's own allocations caused, which is about what the CLI holds live, and when
 * (ms since the process started) the peaks of RSS and heap came. It forces no collection, so the
 * figures are the CLI's own behaviour. When the process exits, the peaks go as JSON to the file
 * LENSTACK_MEMORY_PROBE names.
 */
import { writeFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';

const out = process.env.LENSTACK_MEMORY_PROBE;
const peak = { spacesAtPeak: {} as Record<string, number>, rss: 0, heapUsed: 0, heapCommitted: 0, external: 0, arrayBuffers: 0, liveAfterFullGc: 0, fullGcs: 0, rssAtMs: 0, heapUsedAtMs: 0, exitAtMs: 0 };

function sample(): void {
  const m = process.memoryUsage();
  // What V8 holds from the system for its heap (used or not): part of the RSS.
  const held = getHeapStatistics().total_physical_size;
  if (held > peak.heapCommitted) {
    peak.heapCommitted = held;
    // Which of V8's spaces held it then (MiB): the young generation (new_space) or the old.
    peak.spacesAtPeak = Object.fromEntries(getHeapSpaceStatistics().filter((x) => x.physical_space_size > 0).map((x) => [x.space_name, Math.round(x.physical_space_size / 2 ** 17) / 8]));
  }
  const at = Math.round(performance.now());
  if (m.rss > peak.rss) Object.assign(peak, { rss: m.rss, rssAtMs: at });
  if (m.heapUsed > peak.heapUsed) Object.assign(peak, { heapUsed: m.heapUsed, heapUsedAtMs: at });
  peak.external = Math.max(peak.external, m.external);
  peak.arrayBuffers = Math.max(peak.arrayBuffers, m.arrayBuffers);
}

setInterval(sample, 10).unref();
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if ((entry as { detail?: { kind?: number } }).detail?.kind !== constants.NODE_PERFORMANCE_GC_MAJOR) continue;
    peak.fullGcs++;
    peak.liveAfterFullGc = Math.max(peak.liveAfterFullGc, process.memoryUsage().heapUsed);
  }
}).observe({ entryTypes: ['gc'] });

process.on('exit', () => {
  sample();
  peak.exitAtMs = Math.round(performance.now());
  if (out) writeFileSync(out, JSON.stringify(peak));
});
