import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Registry } from './registry.ts';

/**
 * The process figures every Node service exposes (names as prom-client's defaults, so existing
 * dashboards fit): resident memory, heap, CPU seconds, start time, event-loop delay.
 */
export function registerProcessMetrics(registry: Registry): void {
  const startSeconds = Math.round((Date.now() - performance.now()) / 1000);
  const loop = monitorEventLoopDelay({ resolution: 20 });
  loop.enable();
  registry.sampled({
    name: 'process_resident_memory_bytes',
    help: 'Resident memory size in bytes.',
    type: 'gauge',
    read: () => process.memoryUsage.rss(),
  });
  registry.sampled({
    name: 'nodejs_heap_size_used_bytes',
    help: 'V8 heap in use, in bytes.',
    type: 'gauge',
    read: () => process.memoryUsage().heapUsed,
  });
  registry.sampled({
    name: 'nodejs_external_memory_bytes',
    help: 'Memory of C++ objects bound to JavaScript objects (Buffers included), in bytes.',
    type: 'gauge',
    read: () => process.memoryUsage().external,
  });
  registry.sampled({
    name: 'process_cpu_seconds_total',
    help: 'User and system CPU time spent, in seconds.',
    type: 'counter',
    read: () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    },
  });
  registry.sampled({
    name: 'process_start_time_seconds',
    help: 'Start time of the process since the Unix epoch, in seconds.',
    type: 'gauge',
    read: () => startSeconds,
  });
  registry.sampled({
    name: 'nodejs_eventloop_lag_p99_seconds',
    help: '99th percentile of the event-loop delay since the previous scrape, in seconds.',
    type: 'gauge',
    read: () => {
      const p99 = loop.percentile(99) / 1e9;
      loop.reset();
      return Number.isFinite(p99) ? p99 : 0;
    },
  });
}
