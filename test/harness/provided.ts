/**
 * What the global setup hands to every test file through vitest's provide/inject. One run of
 * `vitest run` gets its own database, Temporal, Redis prefix, task queue and blob directory, so
 * runs can overlap on one machine.
 */
export interface HarnessValues {
  /** Unique id of this test run (also in the names below). */
  runId: string;
  /** postgres:// URL of a database created and migrated for this run, dropped after it. */
  databaseUrl: string;
  redisUrl: string;
  /** Key prefix owned by this run, ending in ':'; its keys are deleted after the run. */
  redisPrefix: string;
  /** host:port of a Temporal frontend: this run's own dev server, or TEMPORAL_ADDRESS. */
  temporalAddress: string;
  temporalNamespace: string;
  /** Task queue name owned by this run. */
  temporalTaskQueue: string;
  /** Empty directory for blobs, removed after the run. */
  blobDir: string;
  /** The run's HEIC_DECODER (`auto` unless set when the run started): every test file starts with it. */
  heicDecoder: 'auto' | 'native' | 'wasm';
  /**
   * The workflow code bundled once for the run (tools/scripts/workflow-bundle.ts), which every
   * worker a test file starts loads instead of bundling it again; '' when bundling failed in the
   * setup (a test file then bundles itself, and reports the bundler's error).
   */
  workflowBundlePath: string;
  /** The Go-built tools (go-tools.ts) each test file of the run reaches, by absolute path; files needing none are left out. */
  toolsOfFiles: Record<string, string[]>;
  /** The test files that need Temporal (temporal-files.ts), by absolute path. */
  temporalFiles: string[];
  /**
   * '' when Temporal answered before the tests started. Else (its CLI being built with Go) the
   * file written when it answers ("ready") or could not start ("failed: …"): the files that need
   * it wait for it (wait-for-tools.ts).
   */
  temporalReadyFile: string;
}

declare module 'vitest' {
  export interface ProvidedContext extends HarnessValues {}
}
