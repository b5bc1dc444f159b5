/**
 * vitest global setup: real services for one test run, provided to the tests (see provided.ts).
 * Postgres and Redis must already run; the database, Temporal dev server, Redis prefix, task
 * queue and blob directory are this run's own and are cleaned up after it.
 */
import { ensureConsoleBuilt } from '../../tools/scripts/build-web.ts';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { goToolPath } from '../../tools/scripts/go-tool.ts';
import { ensureHeicDecoder } from '../../tools/scripts/heic-decoder.ts';
import { DEFAULT_HEIF_DECODE_PATH } from '../../images/heic-native.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../core/config.ts';
import { migrate } from '../../db/migrate.ts';
import { connectIfTemporal, ensureSearchAttributes, startTemporalDevServer } from '../../tools/scripts/temporal.ts';
import { ensureTemporalCli, temporalCliAtHand } from '../../tools/scripts/temporal-cli.ts';
import { temporalFilesOf } from './temporal-files.ts';
import { ImportGraph } from '../../tools/scripts/import-graph.ts';
import type { HarnessValues } from './provided.ts';
import { assertPostgresAnswers, assertRedisAnswers, deleteRedisKeys, HarnessError, safeUrl } from './services.ts';
import { formatMissing, preflight } from '../../tools/scripts/preflight.ts';
import { createTestDatabase, type TestDatabase } from './test-database.ts';
import { ensureWorkflowBundle } from '../../tools/scripts/workflow-bundle.ts';
import { HARNESS_TOOLS, toolsOf } from './go-tools.ts';

interface HarnessSettings {
  /** Server the test database is created on (its database name is ignored). */
  databaseUrl: string;
  redisUrl: string;
  /** An existing Temporal to use instead of starting one. */
  temporalAddress: string | undefined;
  temporalNamespace: string;
  /** KEEP_TEST_DB=1 leaves the run's database behind for inspection. */
  keepDatabase: boolean;
  /** HEIC_DECODER=wasm runs the whole suite on the WASM fallback (tests that name a decoder keep theirs). */
  heicDecoder: HarnessValues['heicDecoder'];
}

/** The only place the harness reads the environment. */
function harnessSettings(env: NodeJS.ProcessEnv = process.env): HarnessSettings {
  const config = loadConfig(env);
  return {
    databaseUrl: config.DATABASE_URL,
    redisUrl: config.REDIS_URL,
    temporalAddress: config.TEMPORAL_ADDRESS,
    temporalNamespace: config.TEMPORAL_NAMESPACE,
    keepDatabase: env.KEEP_TEST_DB === '1',
    heicDecoder: config.HEIC_DECODER,
  };
}

type Cleanup = () => Promise<unknown>;

/**
 * Niceness of the background tool builds: under contention the tests get about nine tenths of the
 * CPU, and the builds every cycle the tests leave idle (waiting on Temporal, Postgres, a child).
 */
const BACKGROUND_NICE = 10;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const settings = harnessSettings();
  const runId = `${process.pid}-${randomBytes(3).toString('hex')}`;
  const started = Date.now();
  const cleanups: Cleanup[] = [];
  const teardown = async () => {
    const errors: unknown[] = [];
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => errors.push(err));
    if (errors.length > 0) throw new AggregateError(errors, 'test harness teardown failed');
  };

  try {
    // Everything the run needs, checked at once and reported together before anything is built.
    const wholeSuite = process.env.npm_lifecycle_event === 'test';
    const goTools = wholeSuite ? await Promise.all(HARNESS_TOOLS.map((t) => t.tool())) : [];
    const [missing, services] = await Promise.all([
      preflight({ browser: wholeSuite, goTools, temporal: !settings.temporalAddress, testPrograms: wholeSuite, ...(wholeSuite ? { heicDecoder: DEFAULT_HEIF_DECODE_PATH } : {}) }),
      Promise.allSettled([assertPostgresAnswers(settings.databaseUrl), assertRedisAnswers(settings.redisUrl)]),
    ]);
    const down = services.flatMap((r) => (r.status === 'rejected' ? [r.reason instanceof Error ? r.reason.message : String(r.reason)] : []));
    if (missing.length || down.length) {
      const report = [missing.length ? formatMissing(missing) : '', ...down].filter(Boolean).join('\n\n');
      // The whole suite stops here, before any build: every one of these fails tests later.
      // A run of a few files goes on with a warning (it may not need them), unless a service is down.
      if (wholeSuite || down.length) throw new HarnessError(report);
      process.stderr.write(`[harness] ${report}\n`);
    }

    const log = (line: string) => process.stderr.write(`[harness] ${line}\n`);
    // The Go-built test tools (go-tools.ts), for the whole suite (`npm test`): the missing ones are
    // built in the background at low CPU priority while the tests that need none of them run; the
    // files that need one run last and wait for it (sequencer.ts, wait-for-tools.ts). A run of a
    // few files builds what its files need before they start (wait-for-tools.ts).
    // When the temporal CLI is built too, most of them start once it is (buildInBackground).
    let temporalCliSettled!: (next: 'build' | 'skip') => void;
    const afterTemporalCli = new Promise<'build' | 'skip'>((resolve) => (temporalCliSettled = resolve));
    const backgroundBuilds = wholeSuite ? buildInBackground(log, afterTemporalCli) : Promise.resolve();
    cleanups.push(() => backgroundBuilds);
    // A run that ends first starts none of the builds still waiting.
    cleanups.push(async () => temporalCliSettled('skip'));

    const redisPrefix = `lenstack-test:${runId}:`;
    cleanups.push(() => deleteRedisKeys(settings.redisUrl, redisPrefix));
    const blobDir = await mkdtemp(join(tmpdir(), `lenstack-test-${runId}-blobs-`));
    cleanups.push(() => rm(blobDir, { recursive: true, force: true }));

    // Everything the tests need before they start, side by side. Temporal takes the longest (on a
    // fresh machine its CLI is built with Go first): the database is migrated meanwhile, and ...
    // ... the native HEIC decoder built once per source (about a second): the HEIC tests run on it
    // and on the WASM fallback. Without a C compiler and libheif's headers the tests on it fail, saying so.
    const heicDecoder = ensureHeicDecoder({ log }).then(
      () => {},
      (err: unknown) => log(`native HEIC decoder not built: ${err instanceof Error ? err.message : String(err)}`),
    );
    // ... the workflow code bundled once for the run (cached across runs under a hash of its
    // sources): every test file that starts a worker loads it instead of running webpack again.
    // The run keeps its own copy: the shared cache may drop an entry while a long run still reads it.
    const runBundle = join(tmpdir(), `lenstack-test-${runId}-workflows.js`);
    cleanups.push(() => rm(runBundle, { force: true }));
    const workflowBundle = ensureWorkflowBundle({ log }).then(
      async ({ path }) => {
        await copyFile(path, runBundle);
        return runBundle;
      },
      (err: unknown) => {
        // The test files that start a worker bundle it themselves and fail with the bundler's error.
        log(`could not bundle the workflow code: ${err instanceof Error ? err.message : String(err)}`);
        return '';
      },
    );
    // ... and the console's front end, once for the run (the browser tests serve it): Vite, under a second.
    const consoleBuilt = ensureConsoleBuilt().then(() => null, (err: unknown) => err);
    const testFiles = project.globTestFiles().then(({ testFiles }) => testFiles);
    // One import graph for both questions: each file is read once.
    const graph = new ImportGraph();
    const toolsOfFiles = testFiles.then(async (files) => {
      const found: Record<string, string[]> = {};
      for (const [file, tools] of await toolsOf(files, graph)) if (tools.length) found[file] = tools.map((t) => t.name);
      return found;
    });
    const temporalFiles = testFiles.then(async (files) => [...(await temporalFilesOf(files, graph))]);
    // Temporal: with its CLI at hand the tests start once the dev server answers (a few seconds).
    // When the CLI must first be built with Go (a fresh machine: minutes), the whole suite does
    // not wait for it: the server starts in the background at an address fixed now, and only the
    // files that need it (temporal-files.ts) run last, each waiting for it (wait-for-tools.ts).
    // The CLI is looked for once: its path goes to the server's start.
    const cliPath = settings.temporalAddress ? null : await temporalCliAtHand({ log });
    const buildCli = wholeSuite && !settings.temporalAddress && cliPath === null;
    if (!buildCli) temporalCliSettled('build');
    const [database, temporal] = await settleAll(cleanups, [
      prepareDatabase(settings),
      buildCli ? prepareTemporalLater(settings, runId, log, temporalCliSettled) : prepareTemporal(settings, cliPath),
    ] as const);
    await heicDecoder;
    const workflowBundlePath = await workflowBundle;
    const consoleError = await consoleBuilt;
    if (consoleError) throw consoleError;

    const values: HarnessValues = {
      runId,
      databaseUrl: database.url,
      redisUrl: settings.redisUrl,
      redisPrefix,
      temporalAddress: temporal.address,
      temporalNamespace: settings.temporalNamespace,
      temporalTaskQueue: `lenstack-test-${runId}`,
      blobDir,
      heicDecoder: settings.heicDecoder,
      workflowBundlePath,
      toolsOfFiles: await toolsOfFiles,
      temporalFiles: await temporalFiles,
      temporalReadyFile: temporal.readyFile,
    };
    for (const [key, value] of Object.entries(values)) project.provide(key as keyof HarnessValues, value);

    process.stderr.write(
      `[harness] ready in ${((Date.now() - started) / 1000).toFixed(1)} s: database ${database.name}, ` +
        `Temporal ${temporal.address} (${temporal.description}), Redis ${safeUrl(settings.redisUrl)} prefix ${redisPrefix}\n`,
    );
    return teardown;
  } catch (err) {
    await teardown().catch(() => {});
    throw err;
  }
}

/**
 * Awaits every step; a finished step's cleanup is registered even when another step fails, so a
 * failed setup never leaves a database or a server behind.
 */
async function settleAll<T extends readonly Promise<{ cleanup: Cleanup }>[]>(
  cleanups: Cleanup[],
  steps: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(steps);
  for (const r of results) if (r.status === 'fulfilled') cleanups.push(r.value.cleanup);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

async function prepareDatabase(settings: HarnessSettings): Promise<TestDatabase & { cleanup: Cleanup }> {
  const database = await createTestDatabase(settings.databaseUrl);
  const cleanup = async () => {
    await database.dispose({ keep: settings.keepDatabase });
    if (settings.keepDatabase) process.stderr.write(`[harness] KEEP_TEST_DB=1: kept ${safeUrl(database.url)}\n`);
  };
  try {
    await migrate(database.url);
  } catch (err) {
    await cleanup().catch(() => {});
    throw err;
  }
  return { ...database, cleanup };
}

interface PreparedTemporal {
  address: string;
  description: string;
  /** '' when Temporal answers before the tests start; else the file that says when it does (or why it could not). */
  readyFile: string;
  cleanup: Cleanup;
}

/** `cliPath`: the temporal CLI found at hand, or null to find or build it now. */
async function prepareTemporal(settings: HarnessSettings, cliPath: string | null): Promise<PreparedTemporal> {
  if (settings.temporalAddress) {
    const connection = await connectIfTemporal(settings.temporalAddress, settings.temporalNamespace, 10_000);
    try {
      await ensureSearchAttributes(connection, settings.temporalNamespace);
    } finally {
      await connection.close();
    }
    return { address: settings.temporalAddress, description: 'TEMPORAL_ADDRESS', readyFile: '', cleanup: async () => {} };
  }
  const started = Date.now();
  const server = await startTemporalDevServer({ namespace: settings.temporalNamespace, ...(cliPath ? { cliPath } : {}) });
  const description = `own dev server, up in ${((Date.now() - started) / 1000).toFixed(1)} s`;
  return { address: server.address, description, readyFile: '', cleanup: () => server.stop() };
}

/**
 * Temporal when its CLI must be built first: the address is fixed now (a port held open by this
 * process until the server takes it over, so no other process is given it meanwhile), the CLI is
 * built and the server started in the background, and `readyFile` is written when it answers
 * ("ready") or could not start ("failed: …"). The build is not niced: the files waiting for it are
 * most of the suite.
 */
async function prepareTemporalLater(
  settings: HarnessSettings,
  runId: string,
  log: (line: string) => void,
  cliBuildEnded: (next: 'build' | 'skip') => void,
): Promise<PreparedTemporal> {
  const held = await holdPort();
  const readyFile = join(tmpdir(), `lenstack-test-${runId}-temporal`);
  const started = Date.now();
  // A run that ends while the CLI still builds (a failed setup) lets the build finish
  // into the cache but starts no server.
  let closing = false;
  log('the temporal CLI is not built: building it with Go in the background (once; minutes); the test files that need no Temporal run meanwhile');
  const server = (async () => {
    let cliPath: string;
    try {
      cliPath = await ensureTemporalCli({ log: (line) => log(`temporal CLI: ${line}`) });
    } finally {
      // The tools waiting for this build start now, unless the run is ending (teardown waits for
      // this build, and would wait for theirs too).
      cliBuildEnded(closing ? 'skip' : 'build');
      // Released only now, right before the server binds it: the CLI is found, not looked for again.
      await held.release();
    }
    if (closing) throw new Error('the test run ended first');
    return startTemporalDevServer({ cliPath, namespace: settings.temporalNamespace, port: held.port });
  })();
  const announced = server
    .then(
      async (s) => {
        log(`Temporal ${s.address} answers after ${((Date.now() - started) / 1000).toFixed(0)} s: the test files that need it start`);
        await say(readyFile, 'ready');
      },
      async (err: unknown) => {
        const why = err instanceof Error ? err.message : String(err);
        log(`Temporal could not start: ${why}`);
        await say(readyFile, `failed: ${why}`);
      },
    )
    // The files waiting for it would wait for ever: say so where the run's output shows it.
    .catch((err: unknown) => log(`could not write ${readyFile}, so the files that need Temporal will not start: ${err instanceof Error ? err.message : String(err)}`));
  return {
    address: `127.0.0.1:${held.port}`,
    description: 'own dev server, starting once its CLI is built',
    readyFile,
    cleanup: async () => {
      closing = true;
      await announced;
      await server.then((s) => s.stop(), () => {});
      await rm(readyFile, { force: true });
    },
  };
}

/** Writes `file` whole or not at all (a reader polling for it never sees it half written). */
async function say(file: string, text: string): Promise<void> {
  await writeFile(`${file}.partial`, text);
  await rename(`${file}.partial`, file);
}

/** A free port on 127.0.0.1, kept listening (so nobody else is given it) until `release`. */
function holdPort(): Promise<{ port: number; release: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.destroy());
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      let released: Promise<void> | undefined;
      resolve({ port, release: () => (released ??= new Promise<void>((done) => server.close(() => done()))) });
    });
  });
}

/**
 * Builds the missing Go-built test tools side by side (each Go build waits on downloads and the
 * linker as much as on the CPU), niced so the tests running meanwhile keep the CPU they use. When
 * the temporal CLI is being built too, only the tools marked `besideTemporalCli` start at once: the
 * CLI's build is what the files needing Temporal (half the suite, and its longest files) wait for,
 * and the others' builds, as much CPU again, more than doubled its time (docs/decisions.md, "Test run time").
 * They start when `afterTemporalCli` says 'build' (the CLI's build ended), and never on 'skip' (the
 * run ended first). Never rejects: a failed build is reported here, and again by the tests that use
 * the tool.
 */
async function buildInBackground(log: (line: string) => void, afterTemporalCli: Promise<'build' | 'skip'>): Promise<void> {
  await Promise.all(
    HARNESS_TOOLS.map(async (tool) => {
      try {
        if (await tool.ready()) return;
        const pin = await tool.tool();
        if (!tool.besideTemporalCli && (await afterTemporalCli) === 'skip') return;
        log(`building ${pin.name} ${pin.version} with Go in the background (once; cached in ${goToolPath(pin)}); the tests that need it run last`);
        const t0 = Date.now();
        await tool.ensure({ nice: BACKGROUND_NICE });
        log(`built ${pin.name} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      } catch (err) {
        log(`could not build ${tool.name}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }),
  );
}
