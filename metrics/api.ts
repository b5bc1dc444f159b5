import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Latency buckets (seconds) for HTTP requests: cache hits in milliseconds, analyses in seconds. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Workflow buckets (seconds): a vendor call is seconds, a 50-photo report minutes, the cap 10 min. */
const WORKFLOW_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];
/** CPU milliseconds of one analysis in one process: a cache hit is a few, a 50-photo decode seconds. */
export const CPU_MS_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

/**
 * What an API process measures. Labels stay low-cardinality: route patterns (never URLs),
 * methods, status codes, outcomes and error codes; never user ids, keys or hashes.
 */
export function createApiMetrics(registry = new Registry()) {
  // prom-client's process figures: process_resident_memory_bytes, process_cpu_seconds_total,
  // process_start_time_seconds, nodejs_heap_size_used_bytes, nodejs_eventloop_lag_p99_seconds, ...
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    httpRequests: new Counter({
      registers,
      name: 'lenstack_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status'],
    }),
    httpDuration: new Histogram({
      registers,
      name: 'lenstack_http_request_duration_seconds',
      help: 'Time from receiving a request to the end of its response, by method and route pattern.',
      labelNames: ['method', 'route'],
      buckets: HTTP_BUCKETS,
    }),
    httpInFlight: new Gauge({
      registers,
      name: 'lenstack_http_requests_in_flight',
      help: 'Requests received and not yet answered (or abandoned by the client).',
    }),
    analyses: new Counter({
      registers,
      name: 'lenstack_analyses_total',
      help: 'Analyze requests (v1 and v2) by outcome (analyzed, cache_hit, sandbox, failed) and error code (OK on success).',
      labelNames: ['outcome', 'code'],
    }),
    analysisCpu: new Histogram({
      registers,
      name: 'lenstack_analysis_cpu_milliseconds',
      help: 'CPU milliseconds the API process spent on one analyze request, from its arrival to its answer (its equal share while requests overlap: core/cpu-shares.ts), by outcome as in lenstack_analyses_total.',
      labelNames: ['outcome'],
      buckets: CPU_MS_BUCKETS,
    }),
    workflowsStarted: new Counter({
      registers,
      name: 'lenstack_workflows_started_total',
      help: 'Workflows the API started (start="new") or attached to because the same request id had started one (start="attached").',
      labelNames: ['workflow', 'start'],
    }),
    workflowDuration: new Histogram({
      registers,
      name: 'lenstack_workflow_duration_seconds',
      help: 'End-to-end time from starting (or attaching to) a workflow to its result, measured in the API, by workflow and outcome (succeeded, failed, abandoned at shutdown).',
      labelNames: ['workflow', 'outcome'],
      buckets: WORKFLOW_BUCKETS,
    }),
    requestLogRows: new Counter({
      registers,
      name: 'lenstack_request_log_rows_total',
      help: 'Rows of the console\'s request log (requestlog/buffer.ts): written, or dropped because the buffer was full (dropped_full) or the INSERT failed (dropped_db).',
      labelNames: ['outcome'],
    }),
  };
}

export type ApiMetrics = ReturnType<typeof createApiMetrics>;
