import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { issueKey } from '../../auth/repository.ts';
import { VENDOR_ENV_PREFIX, VENDOR_NAMES } from '../../core/vendor-names.ts';
import { createBillingAccount } from '../../accounts/billing-accounts.ts';
import { grant, sweepExpired } from '../../credits/ledger.ts';
import { createPool } from '../../db/pool.ts';
import { startSimVendor } from '../sim/index.ts';
import { FAILURE_MODES, type FailureMode } from '../sim/behaviour.ts';
import { intIn, pick, rngFor, type Rng } from '../../samples/random.ts';
import { freePort } from '../scripts/temporal.ts';
import { ensureWorkflowBundle } from '../scripts/workflow-bundle.ts';
import { checkBlobs, checkBooks } from './checks.ts';
import { batchBody, checkBatches, followBatch, planBatches, runBatchJob, submitBatch, type BatchResult } from './batches.ts';
import { emptyTusStats, interruptedUpload, type TusDoor } from './uploads.ts';
import { startMailCatcher } from '../../web/mail.ts';
import { STARTING_STALE_MS } from '../../batches/submit.ts';
import type { PrivatePostgres, RestartableTemporal } from './infra.ts';
import { runCall, type CallResult } from './client.ts';
import { judgeProbes, probeConsoles, type ProbeAttempt } from './console-probe.ts';
import { FaultProxy, type Faults, type FaultProxyStats } from './fault-proxy.ts';
import { makePlan, type PlannedCall } from './plan.ts';
import { pollUntil, ServiceProcess, waitApiReady, waitWorkerReady, type ExitRecord, type Kind } from './processes.ts';

/**
 * The chaos driver: real API, worker and console processes against Postgres and Redis (through
 * fault proxies), the simulated vendors failing and stalling, workers
 * SIGKILLed and restarted, API processes stopped and killed with uploads cut mid-PATCH, console
 * processes killed mid-upload, while clients send a seeded plan of analyze calls and batch clients
 * upload photos with tus and submit batches over them. Then the load and the faults stop, every
 * workflow and batch ends, the sweeper runs once past every expiry, and the books, the batches and
 * the answers are checked. Every loop is bounded in count and time; the run stops by itself.
 */

export interface ChaosServices {
  /** The database the service uses (reached through the Postgres fault proxy). */
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  temporalAddress: string;
  temporalNamespace: string;
  taskQueue: string;
  blobDir: string;
  /** Logs of every process, the workflow bundle and the report go here. */
  runDir: string;
  /** The run's own Postgres cluster (databaseUrl is on it): immediate stops and starts. Without it, no Postgres restarts. */
  postgres?: PrivatePostgres;
  /** The run's own Temporal server (temporalAddress is its): SIGKILLs, restarts, the outage. Without it, none of those. */
  temporalServer?: RestartableTemporal;
}

export interface ChaosOptions {
  seed: string;
  calls: number;
  clients: number;
  users: number;
  /** Bound on the load phase: no call starts after it (the rest are reported as not sent). */
  durationMs: number;
  /** Worker processes kept running (the kill loop takes them down and brings them back). */
  workers: number;
  /** API processes behind the clients. */
  apis: number;
  /** Pause between two kill events, drawn in [min, max] ms. */
  killEveryMs: [number, number];
  /** Share of kill events that take every worker down at once (briefly none is polling). */
  allDownShare: number;
  /** Share of kill events that are a graceful SIGTERM instead of a SIGKILL. */
  sigtermShare: number;
  /** Graceful stops (SIGTERM, drain) of an API process during the load. */
  apiTerms: number;
  /** SIGKILLs of an API process with analyses in flight, each restarted on its port. */
  apiKills: number;
  /** SIGKILLs of the Temporal server, started again at once on the same port and state file. */
  temporalKills: number;
  /** `pg_ctl stop -m immediate` of the run's Postgres, started again after pgDownMs. */
  pgRestarts: number;
  /** How long Postgres stays down after an immediate stop, drawn in [min, max] ms. */
  pgDownMs: [number, number];
  /**
   * One Temporal outage (SIGKILL, down this long, restart) longer than the API waits for Temporal
   * (analysis/await-workflow.ts: 5 s to start a workflow, ~20 s of gRPC retries while awaiting
   * one); 0 for none. Callers meanwhile must get 503 with Retry-After.
   */
  temporalOutageMs: number;
  /** Share of vendor calls that fail; each vendor's failure mode changes every WEATHER_MS. */
  vendorFailRate: number;
  /** Chance per weather window of a stall burst: one vendor's failures hang (until aborted) for 2–5 s. */
  stallBurstChance: number;
  pgFaults: Faults;
  redisFaults: Faults;
  workflowTimeoutMs: number;
  reservationTtlMs: number;
  /** The workers' reservation sweeper period. */
  sweepIntervalMs: number;
  /** Distinct photos in the plan. */
  images: number;
  /** Client-side bound on one HTTP attempt; past it the call is a hang (a failure). */
  clientTimeoutMs: number;
  /** Batch jobs: photos uploaded with tus through the API, a photo or vehicle batch over them, awaited to its end. */
  batches: number;
  /** Their own users (funded for every photo: a batch out of credits pauses, it does not end). */
  batchUsers: number;
  /** Concurrent batch clients (besides the analyze clients). */
  batchClients: number;
  /** Console processes (web/server.ts); 0 for none. */
  consoles: number;
  /** SIGKILLs of a console replica mid-upload, each restarted on its port; the upload finishes through the other. */
  consoleKills: number;
  log: (line: string) => void;
}

export interface ChaosReport {
  ok: boolean;
  failures: string[];
  /** The printable report. */
  lines: string[];
  figures: {
    sent: number;
    answered: number;
    outcomes: Record<string, number>;
    attempts: number;
    workerKills: number;
    allDown: number;
    workerStarts: number;
    apiKills: number;
    consoleKills: number;
    /** The console person's requests during the load, by status (or connection error). */
    consoleRequests: Record<string, number>;
    /** Uploads cut by an API or console SIGKILL, finished through the other replica. */
    resumedUploads: number;
    batches: Record<string, number>;
    batchItems: Record<string, number>;
    /** Faults of the restart schedule, by kind (api-term, api-kill, temporal-kill, temporal-outage, pg-restart). */
    restarts: Record<string, number>;
    /** Attempts answered (or not) while Temporal or Postgres was down, by status. */
    duringOutage: Record<string, number>;
    /** Slowest single attempt (ms) and slowest call (ms, every attempt of it). */
    slowestAttemptMs: number;
    slowestCallMs: number;
    /** Registry photos of the run whose blob is missing from the store. */
    missingBlobs: number;
    /** Workflows the suite had to terminate after the load (each one a failure). */
    terminated: number;
    pgResets: number;
    redisResets: number;
    stalls: number;
    vendorCalls: number;
    vendorFailures: number;
    workflows: Record<string, number>;
    crashes: number;
    books: Awaited<ReturnType<typeof checkBooks>>['figures'];
  };
}

/** The full-size defaults of `npm run chaos`. */
export const FULL_SIZE: Omit<ChaosOptions, 'seed' | 'log'> = {
  calls: 2000,
  clients: 20,
  users: 50,
  durationMs: 30 * 60_000,
  workers: 3,
  apis: 2,
  killEveryMs: [3_000, 8_000],
  allDownShare: 0.05,
  sigtermShare: 0.1,
  apiTerms: 1,
  apiKills: 3,
  temporalKills: 3,
  pgRestarts: 3,
  pgDownMs: [1_000, 4_000],
  temporalOutageMs: 120_000,
  vendorFailRate: 0.3,
  stallBurstChance: 0.6,
  pgFaults: { resetPerSecond: 1, stallPerSecond: 0.4, stallMs: [200, 2_000], acceptResetRate: 0.02 },
  redisFaults: { resetPerSecond: 0.3, stallPerSecond: 0.2, stallMs: [200, 1_500], acceptResetRate: 0.02 },
  // Longer than the Temporal outage: a run the outage delays finishes after it (production's is
  // 10 minutes) instead of timing out while the server that times it is away.
  workflowTimeoutMs: 180_000,
  reservationTtlMs: 190_000,
  sweepIntervalMs: 2_000,
  images: 60,
  clientTimeoutMs: 75_000,
  batches: 60,
  batchUsers: 10,
  batchClients: 4,
  consoles: 2,
  consoleKills: 3,
};

const VENDORS = VENDOR_NAMES;
/** How often the simulated vendors change failure mode and latency (the failure sequence goes on). */
const WEATHER_MS = 10_000;
const KEEP = { keepFailureSequence: true };
// Generous: on a shared 2-core machine under other suites a process has taken 70+ s to start.
const READY_TIMEOUT_MS = 180_000;
const API_SHUTDOWN_GRACE_MS = 3_000;
const WORKER_SHUTDOWN_GRACE_MS = 2_000;
/** Attempts of one analyze call at most: a bound; the client's retry window ends it first (runCall). */
const MAX_ATTEMPTS = 60;
/**
 * How long past the Temporal outage an analyze client keeps resending a call told to come back. Its
 * window counts from the call's first attempt, which may have waited up to the client timeout
 * before the outage began, so the window is that + the outage + this: the full run saw the dev
 * server take ~40 s after its restart to take workflow starts again (a single SQLite shard working
 * through the outage's backlog on a loaded machine), the API answering 503 + Retry-After meanwhile.
 */
const RETRY_BEYOND_OUTAGE_MS = 60_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class Stopper {
  stopped = false;
  private wakers = new Set<() => void>();
  stop(): void {
    this.stopped = true;
    for (const w of this.wakers) w();
    this.wakers.clear();
  }
  /** Sleep `ms`, or less if stopped meanwhile. */
  sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.wakers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.wakers.add(done);
    });
  }
}

/** Slots of one kind of process, restarted by the driver; unexpected exits are recorded (and restarted). */
class Group {
  readonly procs: Array<ServiceProcess | undefined>;
  readonly crashes: ExitRecord[] = [];
  readonly exits: ExitRecord[] = [];
  starts = 0;
  private gen = 0;
  supervising = true;
  /** Set by stopAll: restarts not yet spawned never will be. */
  private closed = false;
  private readonly pending = new Set<Promise<unknown>>();

  constructor(
    readonly kind: Kind,
    size: number,
    private readonly spawn: (name: string, slot: number) => ServiceProcess,
    private readonly ready: (p: ServiceProcess) => Promise<boolean>,
    private readonly log: (line: string) => void,
  ) {
    this.procs = new Array(size).fill(undefined);
  }

  aliveSlots(): number[] {
    return this.procs.flatMap((p, i) => (p?.alive ? [i] : []));
  }

  /** Slots whose process is alive and was seen ready (polling / answering). */
  readySlots(): number[] {
    return this.procs.flatMap((p, i) => (p?.ready ? [i] : []));
  }

  /** Spawn-to-ready times of every start. */
  readonly readyTimes: number[] = [];

  /** Start a process in `slot` and wait (bounded) until it is ready. */
  async start(slot: number): Promise<boolean> {
    const p = this.spawn(`${this.kind}-${slot}.${++this.gen}`, slot);
    this.procs[slot] = p;
    this.starts++;
    void p.exited.then((rec) => {
      this.exits.push(rec);
      if (rec.expected) return;
      this.crashes.push(rec);
      this.log(`!! ${rec.name} exited on its own (code ${rec.code}, signal ${rec.signal}); last lines:\n   ${rec.tail.slice(-12).join('\n   ')}`);
      if (this.supervising && this.procs[slot] === p) this.restartLater(slot, 500);
    });
    const ok = await this.ready(p);
    if (ok && p.readyMs !== undefined) this.readyTimes.push(p.readyMs);
    if (!ok && p.alive) this.log(`!! ${p.name} not ready within ${READY_TIMEOUT_MS} ms`);
    return ok;
  }

  /** Restart `slot` after `delayMs` unless something already runs there; tracked for settle(). */
  restartLater(slot: number, delayMs: number): void {
    const job = (async () => {
      await sleep(delayMs);
      if (this.closed || this.procs[slot]?.alive) return;
      await this.start(slot);
    })();
    this.pending.add(job);
    void job.finally(() => this.pending.delete(job));
  }

  /** Wait for every restart under way. */
  async settle(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  /** No more restarts; stop every process (those still starting too), then wait for the jobs. */
  async stopAll(graceMs: number): Promise<void> {
    this.supervising = false;
    this.closed = true;
    await Promise.all(this.procs.map((p) => (p?.alive ? p.stop(graceMs) : undefined)));
    await this.settle();
  }
}

function pct(xs: number[], p: number): number {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname === 'localhost' ? '127.0.0.1' : u.hostname, port: Number(u.port || defaultPort) };
}

export async function runChaos(services: ChaosServices, o: ChaosOptions): Promise<ChaosReport> {
  const t0 = Date.now();
  const log = o.log;
  const failures: string[] = [];
  const lines: string[] = [];
  await mkdir(path.join(services.runDir, 'logs'), { recursive: true });
  const logDir = path.join(services.runDir, 'logs');

  const db = createPool(services.databaseUrl, { max: 8, application: 'lenstack-chaos' });
  const connection = await Connection.connect({ address: services.temporalAddress });
  const temporal = new Client({ connection, namespace: services.temporalNamespace });
  const sim = await startSimVendor({ port: 0, seed: o.seed });
  const pgProxy = await FaultProxy.start({ name: 'postgres', target: hostPort(services.databaseUrl, 5432), rng: rngFor(`${o.seed}|faults|postgres`) });
  const redisProxy = await FaultProxy.start({ name: 'redis', target: hostPort(services.redisUrl, 6379), rng: rngFor(`${o.seed}|faults|redis`) });
  const stopper = new Stopper();
  const phases = { startup: 0, load: 0, settle: 0, stop: 0 };
  let workers: Group | undefined;
  let apis: Group | undefined;
  let consoles: Group | undefined;
  const mail = o.consoles > 0 ? await startMailCatcher() : undefined;

  try {
    // --- processes, the plan, the users, the workflow bundle (APIs start meanwhile) -----------
    const env: NodeJS.ProcessEnv = { ...process.env };
    const vendorVars = VENDOR_NAMES.flatMap((v) => [`${VENDOR_ENV_PREFIX[v]}_API_KEY`, `${VENDOR_ENV_PREFIX[v]}_BASE_URL`]);
    for (const k of [...vendorVars, 'PORT', 'HOST']) delete env[k];
    Object.assign(env, {
      LOG_LEVEL: 'warn',
      DATABASE_URL: pgProxy.proxiedUrl(services.databaseUrl),
      REDIS_URL: redisProxy.proxiedUrl(services.redisUrl),
      REDIS_PREFIX: services.redisPrefix,
      TEMPORAL_ADDRESS: services.temporalAddress,
      TEMPORAL_NAMESPACE: services.temporalNamespace,
      TEMPORAL_TASK_QUEUE: services.taskQueue,
      BLOB_DIR: services.blobDir,
      SIM_VENDOR_URL: sim.url,
      VENDOR_ORDER: VENDORS.join(','),
      WORKFLOW_TIMEOUT_MS: String(o.workflowTimeoutMs),
      RESERVATION_TTL_MS: String(o.reservationTtlMs),
      SHUTDOWN_GRACE_MS: String(API_SHUTDOWN_GRACE_MS),
    });
    const apiPorts = await Promise.all(Array.from({ length: o.apis }, () => freePort()));
    const apiUrls = apiPorts.map((p) => `http://127.0.0.1:${p}`);
    const bundlePath = path.join(services.runDir, 'workflow-bundle.js');
    workers = new Group(
      'worker',
      o.workers,
      (name) => new ServiceProcess(name, 'worker', 'tools/chaos/worker-process.ts', ['--bundle', bundlePath, '--sweep-ms', String(o.sweepIntervalMs)],
        { ...env, SHUTDOWN_GRACE_MS: String(WORKER_SHUTDOWN_GRACE_MS) }, logDir),
      (p) => waitWorkerReady(p, READY_TIMEOUT_MS),
      log,
    );
    apis = new Group(
      'api',
      o.apis,
      (name, slot) => new ServiceProcess(name, 'api', 'api/server.ts', [], { ...env, HOST: '127.0.0.1', PORT: String(apiPorts[slot]) }, logDir, apiPorts[slot]),
      (p) => waitApiReady(p, READY_TIMEOUT_MS),
      log,
    );
    const apisUp = Promise.all(Array.from({ length: o.apis }, (_, i) => apis!.start(i)));
    // The console replicas (web/server.ts) share the database, Redis, Temporal and the blob
    // store (its upload datastore beside it) with the APIs, through the same fault proxies (resets,
    // stalls, the Postgres restarts); mail goes to the run's catcher.
    const consolePorts = await Promise.all(Array.from({ length: o.consoles }, () => freePort()));
    const consoleUrls = consolePorts.map((p) => `http://127.0.0.1:${p}`);
    const consoleEnv: NodeJS.ProcessEnv = {
      ...env,
      AUTH_SECRET: `chaos-auth-secret-${o.seed}-0123456789abcdef0123456789`,
      SMTP_URL: mail?.url ?? '',
      HOST: '127.0.0.1',
    };
    consoles = new Group(
      'web',
      o.consoles,
      (name, slot) => new ServiceProcess(name, 'web', 'web/server.ts', [], { ...consoleEnv, WEB_PORT: String(consolePorts[slot]), WEB_URL: consoleUrls[slot] }, logDir, consolePorts[slot]),
      (p) => waitApiReady(p, READY_TIMEOUT_MS, '/api/v1/auth/ok'),
      log,
    );
    const consolesUp = Promise.all(Array.from({ length: o.consoles }, (_, i) => consoles!.start(i)));
    consolesUp.catch(() => {});

    const runTag = Date.now().toString(36);
    // Workers start as soon as the workflow code is bundled, while the users are created.
    const workersUp = workflowBundle()
      .then((code) => writeFile(bundlePath, code))
      .then(() => Promise.all(Array.from({ length: o.workers }, (_, i) => workers!.start(i))));
    workersUp.catch(() => {}); // awaited below; a failure before that must not be an unhandled rejection
    apisUp.catch(() => {});
    const plan = await makePlan({ seed: o.seed, runTag, calls: o.calls, users: o.users, images: o.images });
    const keys: string[] = [];
    const accountIds: string[] = [];
    for (const u of plan.users) {
      const { accountId } = await createBillingAccount(db, `chaos-${runTag}-${u.index}@example.test`);
      const { key } = await issueKey(db, accountId, 'live');
      await grant(db, { accountId, pool: 'community', amount: u.community, idempotencyKey: 'chaos-community' });
      if (u.purchased) await grant(db, { accountId, pool: 'purchased', amount: u.purchased, idempotencyKey: 'chaos-purchased' });
      accountIds.push(accountId);
      keys.push(key);
    }
    const workflowIdOf = (c: PlannedCall) => `${c.workflow}:${accountIds[c.user]}:${c.requestId}`;
    log(`plan: ${plan.calls.length} calls, ${plan.users.length} users (${plan.users.reduce((n, u) => n + u.community + u.purchased, 0)} credits granted), ${plan.images.length} photos; seed ${o.seed}`);
    // Batch users: funded for every photo of their batches (lens and report prices are 1 credit).
    const batchPlan = planBatches({ seed: o.seed, runTag, batches: o.batches, users: o.batchUsers, images: plan.images.length });
    const batchKeys: string[] = [];
    const batchAccountIds: string[] = [];
    const needs = (u: number) => batchPlan.filter((b) => b.user === u).reduce((n, b) => n + b.images.length * (b.lenses.length + 1) + 2, 0);
    for (let u = 0; u < (o.batches > 0 ? o.batchUsers : 0); u++) {
      const { accountId } = await createBillingAccount(db, `chaos-${runTag}-batch-${u}@example.test`);
      const { key } = await issueKey(db, accountId, 'live');
      // Enough for the plan's batches and for the uploads cut by kills (their batches are extra).
      await grant(db, { accountId, pool: 'purchased', amount: needs(u) + 40, idempotencyKey: 'chaos-batches' });
      batchAccountIds.push(accountId);
      batchKeys.push(key);
    }
    const imageBytes = plan.images.map((b64) => Buffer.from(b64, 'base64'));
    const startedOk = [...(await workersUp), ...(await apisUp), ...(await consolesUp)];
    if (startedOk.some((ok) => !ok)) throw new Error(`processes not ready: ${[...apis.procs, ...workers.procs, ...consoles.procs].map((p) => `${p?.name} alive=${p?.alive}`).join(', ')}`);
    // A person of the console, signed up the way a browser does (mail link), with a funded workspace.
    const person = o.consoles > 0 ? await consolePerson(consoleUrls[0]!, `chaos-${runTag}-console@example.test`, mail!) : undefined;
    if (person) await grant(db, { accountId: person.workspaceId, pool: 'purchased', amount: 40 * Math.max(1, o.consoleKills), idempotencyKey: 'chaos-console' });
    const accounts = [...accountIds, ...batchAccountIds, ...(person ? [person.workspaceId] : [])];
    phases.startup = Date.now() - t0;
    log(`up in ${(phases.startup / 1000).toFixed(1)} s: ${o.apis} API processes (${apiUrls.join(', ')}), ${o.workers} workers; Postgres via :${pgProxy.port}, Redis via :${redisProxy.port}, sim ${sim.url}`);

    // --- faults -------------------------------------------------------------------------------
    pgProxy.setFaults(o.pgFaults);
    redisProxy.setFaults(o.redisFaults);
    const counts = { workerKills: 0, allDown: 0, sigterms: 0, weatherChanges: 0, stallBursts: 0 };
    const apiShutdownOverruns: string[] = [];
    const apiKilledInFlight: number[] = [];

    const weather = (async () => {
      const rng = rngFor(`${o.seed}|weather`);
      const modes = FAILURE_MODES.filter((m) => m !== 'stall');
      while (!stopper.stopped) {
        const mode = {} as Record<(typeof VENDORS)[number], FailureMode>;
        for (const v of VENDORS) {
          mode[v] = pick(rng, modes);
          sim.setBehaviour(v, { failRate: o.vendorFailRate, failure: mode[v], latencyMs: pick(rng, [0, 20, 100, 250]) }, KEEP);
        }
        counts.weatherChanges++;
        if (rng() < o.stallBurstChance) {
          const v = pick(rng, VENDORS);
          const at = intIn(rng, 0, WEATHER_MS - 5_000);
          const length = intIn(rng, 2_000, 5_000);
          await stopper.sleep(at);
          if (stopper.stopped) break;
          counts.stallBursts++;
          sim.setBehaviour(v, { failure: 'stall' }, KEEP);
          await stopper.sleep(length);
          sim.setBehaviour(v, { failure: mode[v] }, KEEP);
          await stopper.sleep(WEATHER_MS - at - length);
        } else {
          await stopper.sleep(WEATHER_MS);
        }
      }
    })();

    const killLoop = (async () => {
      const rng: Rng = rngFor(`${o.seed}|kills`);
      const w = workers!;
      while (!stopper.stopped) {
        await stopper.sleep(intIn(rng, o.killEveryMs[0], o.killEveryMs[1]));
        if (stopper.stopped) break;
        const r = rng();
        const alive = w.aliveSlots();
        // Killing a worker that is still starting proves nothing: faults hit serving workers.
        if (!w.readySlots().length) continue;
        if (r < o.allDownShare) {
          counts.allDown++;
          counts.workerKills += alive.length;
          for (const s of alive) w.procs[s]!.kill('SIGKILL');
          await Promise.all(alive.map((s) => w.procs[s]!.exited));
          const down = intIn(rng, 1_000, 3_000);
          for (let s = 0; s < o.workers; s++) w.restartLater(s, down);
        } else if (r < o.allDownShare + o.sigtermShare) {
          const s = pick(rng, w.readySlots());
          counts.sigterms++;
          const p = w.procs[s]!;
          void p.stop(WORKER_SHUTDOWN_GRACE_MS + 15_000).then(() => w.restartLater(s, 0));
        } else {
          // Keep one worker polling: bring a dead slot back first when this is the last one.
          if (w.readySlots().length === 1 && o.workers > 1) {
            const dead = [...Array(o.workers).keys()].find((s) => !w.procs[s]?.alive);
            if (dead !== undefined) w.restartLater(dead, 0);
            await pollUntil(() => stopper.stopped || w.readySlots().length > 1, READY_TIMEOUT_MS, 100);
            if (stopper.stopped || w.readySlots().length < 2) continue;
          }
          const s = pick(rng, w.readySlots());
          counts.workerKills++;
          w.procs[s]!.kill('SIGKILL');
          await w.procs[s]!.exited;
          w.restartLater(s, intIn(rng, 0, 1_500));
        }
      }
    })();

    // --- load ---------------------------------------------------------------------------------
    const results: Array<CallResult | undefined> = new Array(plan.calls.length);
    let next = 0;
    let done = 0;
    const loadDeadline = Date.now() + o.durationMs;
    // --- the restart schedule: one fault at a time, each at a point of the plan ----------------
    // Fault k fires once calls up to its point have been sent, and no client sends a call past
    // that point before it has fired: every fault lands with calls in flight and more coming.
    type RestartKind = 'api-term' | 'api-kill' | 'console-kill' | 'temporal-kill' | 'temporal-outage' | 'pg-restart';
    const srng = rngFor(`${o.seed}|restarts`);
    const kinds: RestartKind[] = [
      ...Array<RestartKind>(o.apiTerms).fill('api-term'),
      ...Array<RestartKind>(o.apiKills).fill('api-kill'),
      ...Array<RestartKind>(o.consoles > 1 ? o.consoleKills : 0).fill('console-kill'),
      ...Array<RestartKind>(services.temporalServer ? o.temporalKills : 0).fill('temporal-kill'),
      ...Array<RestartKind>(services.postgres ? o.pgRestarts : 0).fill('pg-restart'),
      ...Array<RestartKind>(services.temporalServer && o.temporalOutageMs > 0 ? 1 : 0).fill('temporal-outage'),
    ];
    for (let i = kinds.length - 1; i > 0; i--) {
      const j = Math.floor(srng() * (i + 1));
      [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
    }
    const schedule = kinds.map((kind, i) => ({ kind, at: Math.max(1, Math.floor(plan.calls.length * (0.06 + (0.8 * (i + 0.5)) / kinds.length))) }));
    let fired = 0;
    /** When Temporal or Postgres was down (from, to: Date.now()), for judging the answers. */
    const downWindows: Array<{ kind: 'temporal' | 'postgres'; from: number; to: number }> = [];
    const restartCounts: Record<string, number> = {};
    const inFlight = new Map<string, number>();
    const tusStats = emptyTusStats();
    const cutUploads: Array<{ kind: 'api' | 'console'; offsetAtKill?: number; size?: number; error?: string }> = [];
    const extraBatches: Array<Promise<BatchResult>> = [];
    const consoleBatches: BatchResult[] = [];
    /** Batch jobs under way (uploading, submitting or followed) when each fault fired. */
    let batchJobsActive = 0;
    const batchJobsAtFault: number[] = [];
    // A client waits for its batch as long as a run may take after an outage, and a little more.
    const batchWaitMs = o.workflowTimeoutMs * 2 + o.temporalOutageMs + 60_000;
    // A batch client resends a submission answered 503 (or lost) for longer than the outage lasts,
    // and longer than a batch stranded `starting` by a killed API answers "still starting" (a
    // resend starts it after STARTING_STALE_MS, batches/submit.ts).
    const submitRetryMs = Math.max(o.temporalOutageMs + 90_000, STARTING_STALE_MS + 60_000);
    const restartFaults = (async () => {
      try {
        await restartSchedule();
      } catch (err) {
        failures.push(`the restart schedule failed at fault ${fired} of ${schedule.length}: ${(err as Error).message}`);
        log(`!! the restart schedule failed at fault ${fired} of ${schedule.length}: ${(err as Error).message.split('\n')[0]}`);
        fired = schedule.length; // let the clients go on
      }
    })();
    async function restartSchedule(): Promise<void> {
      for (const [k, ev] of schedule.entries()) {
        await pollUntil(() => stopper.stopped || next >= ev.at, o.durationMs, 50);
        if (stopper.stopped) return;
        restartCounts[ev.kind] = (restartCounts[ev.kind] ?? 0) + 1;
        fired = k + 1;
        batchJobsAtFault.push(batchJobsActive);
        if (ev.kind === 'api-term' || ev.kind === 'api-kill') {
          // The API with the most requests in flight (analyses waiting on their workflows).
          const slots = apis!.readySlots();
          const slot = slots.sort((a, b) => (inFlight.get(apiUrls[b]!) ?? 0) - (inFlight.get(apiUrls[a]!) ?? 0))[0] ?? k % o.apis;
          const p = apis!.procs[slot];
          if (!p?.alive) continue;
          const busy = inFlight.get(apiUrls[slot]!) ?? 0;
          if (ev.kind === 'api-kill') {
            const sigkill = async () => {
              log(`SIGKILL ${p.name} at ${done} calls, ${busy} request(s) in flight on it${batchAccountIds.length ? ' and an upload' : ''}`);
              apiKilledInFlight.push(busy);
              p.kill('SIGKILL');
              await p.exited;
            };
            if (batchAccountIds.length && o.apis > 1) {
              // An upload whose PATCH is cut by the kill, finished through the other API process,
              // then a batch over it through that process, awaited like the plan's batches.
              const other = apiUrls[(slot + 1) % o.apis]!;
              const u = k % batchAccountIds.length;
              const door: TusDoor = { bases: () => [other], createPath: '/v1/uploads', headers: { authorization: `Bearer ${batchKeys[u]}` } };
              const cut = await interruptedUpload(door, apiUrls[slot]!, other, imageBytes[k % imageBytes.length]!, sigkill, tusStats);
              if (p.alive) await sigkill();
              cutUploads.push({ kind: 'api', ...('error' in cut ? { error: cut.error } : { offsetAtKill: cut.offsetAtKill, size: imageBytes[k % imageBytes.length]!.length }) });
              if (!('error' in cut)) {
                const job = { index: -1 - k, kind: 'photos' as const, label: `upload cut by SIGKILL of ${p.name}` };
                extraBatches.push(
                  (async (): Promise<BatchResult> => {
                    const sent = await submitBatch(readyApis, '/v1/batches', door.headers, batchBody({ kind: 'photos', lenses: ['describe'] }, [cut.id]), `chaos-cut-${runTag}-${k}`, slot + 1, submitRetryMs);
                    const r: BatchResult = { job, uploads: 1, attempts: sent.attempts, ...(sent.batchId ? { batchId: sent.batchId } : {}), ...(sent.refused ? { refused: sent.refused } : {}) };
                    if (sent.batchId) await followBatch(r, readyApis, door.headers, batchWaitMs, () => false);
                    return r;
                  })(),
                );
              }
            } else {
              await sigkill();
            }
          } else {
            log(`SIGTERM ${p.name} at ${done} calls, ${busy} in flight (graceful drain, ${API_SHUTDOWN_GRACE_MS} ms grace)`);
            const bound = API_SHUTDOWN_GRACE_MS + 20_000;
            const t = Date.now();
            const rec = await p.stop(bound);
            if (rec.signal === 'SIGKILL') apiShutdownOverruns.push(`${p.name} still running ${bound} ms after SIGTERM`);
            else log(`${p.name} stopped ${Date.now() - t} ms after SIGTERM (code ${rec.code})`);
          }
          await apis!.start(slot);
        } else if (ev.kind === 'console-kill') {
          // A person's upload through the console's tus route, its PATCH cut by a SIGKILL of the
          // console replica; finished through the other one (both read the shared datastore),
          // then a batch over it from there. The killed replica comes back on its port.
          const cs = consoles!;
          const slot = k % o.consoles;
          const p = cs.procs[slot];
          if (!p?.alive || !person) continue;
          const other = consoleUrls[(slot + 1) % o.consoles]!;
          const headers = { cookie: person.cookie, 'sec-fetch-site': 'same-origin' };
          const door: TusDoor = { bases: () => [other], createPath: '/api/v1/uploads', headers, metadata: `workspace ${Buffer.from(person.workspaceId).toString('base64')}` };
          const sigkill = async () => {
            log(`SIGKILL ${p.name} (console) at ${done} calls, mid-upload`);
            p.kill('SIGKILL');
            await p.exited;
          };
          const cut = await interruptedUpload(door, consoleUrls[slot]!, other, imageBytes[(k + 7) % imageBytes.length]!, sigkill, tusStats);
          if (p.alive) await sigkill();
          cutUploads.push({ kind: 'console', ...('error' in cut ? { error: cut.error } : { offsetAtKill: cut.offsetAtKill, size: imageBytes[(k + 7) % imageBytes.length]!.length }) });
          if (!('error' in cut)) {
            const sent = await submitBatch(() => [other], `/api/v1/workspaces/${person.workspaceId}/batches`, headers, { uploads: [{ id: cut.id, name: `console ${k}` }], modules: ['describe'] }, `chaos-console-${runTag}-${k}`, 0, submitRetryMs);
            consoleBatches.push({ job: { index: -1 - k, kind: 'photos', label: `console upload cut by SIGKILL of ${p.name}` }, uploads: 1, attempts: sent.attempts, ...(sent.batchId ? { batchId: sent.batchId } : {}), ...(sent.refused ? { refused: sent.refused } : {}) });
          }
          await cs.start(slot);
        } else if (ev.kind === 'pg-restart') {
          const pg = services.postgres!;
          const downMs = intIn(srng, o.pgDownMs[0], o.pgDownMs[1]);
          const from = Date.now();
          log(`Postgres: pg_ctl stop -m immediate at ${done} calls, down ${downMs} ms`);
          await pg.stopImmediate();
          await sleep(downMs);
          await pg.restart();
          downWindows.push({ kind: 'postgres', from, to: Date.now() });
          log(`Postgres back after ${Date.now() - from} ms`);
        } else {
          const t = services.temporalServer!;
          const downMs = ev.kind === 'temporal-outage' ? o.temporalOutageMs : 0;
          const from = Date.now();
          log(`Temporal: SIGKILL at ${done} calls${downMs ? `, an outage of ${downMs / 1000} s` : ', restarted at once'}`);
          await t.kill();
          if (downMs) await stopper.sleep(downMs);
          if (downMs && stopper.stopped) await sleep(Math.max(0, from + downMs - Date.now())); // the outage lasts its length even if the load ended
          await t.restart();
          downWindows.push({ kind: 'temporal', from, to: Date.now() });
          log(`Temporal back after ${Date.now() - from} ms`);
        }
      }
    }
    /** A client may send call `i` once every fault scheduled at or before it has fired. */
    const gate = (i: number) => {
      const due = schedule.filter((ev) => ev.at <= i).length;
      return due <= fired ? Promise.resolve(true) : pollUntil(() => stopper.stopped || fired >= due, o.durationMs, 50);
    };

    const progress = setInterval(() => {
      const pg = pgProxy.stats();
      log(`… ${done}/${plan.calls.length} calls answered; workers up ${workers!.aliveSlots().length}/${o.workers}, kills ${counts.workerKills}; ` +
        `pg resets ${pg.resets + pg.acceptResets}, redis resets ${redisProxy.stats().resets + redisProxy.stats().acceptResets}`);
    }, 10_000);
    // A load balancer with health checks: send to API processes that are up, all if none is.
    const readyApis = () => {
      const up = apis!.readySlots().map((s) => apiUrls[s]!);
      return up.length ? up : apiUrls;
    };
    const loadStart = Date.now();
    // A signed-in person using the console on whichever replica is up, until the load ends.
    let loadOver = false;
    const consoleProbes: Promise<ProbeAttempt[]> = person
      ? probeConsoles({ seed: o.seed, loops: 2, bases: () => consoles!.readySlots().map((s) => consoleUrls[s]!), person, stopped: () => loadOver })
      : Promise.resolve([]);
    // The batch clients: upload, submit, follow to the end; alongside the analyze load. Batch k
    // starts once the analyze clients reached the same share of their plan, so batches are
    // uploaded, submitted and running while the faults fire, from the first to the last.
    const batchResults: BatchResult[] = [];
    let nextBatch = 0;
    const batchLoad = Promise.all(
      Array.from({ length: o.batches > 0 ? o.batchClients : 0 }, async () => {
        while (nextBatch < batchPlan.length && Date.now() < loadDeadline) {
          const job = batchPlan[nextBatch++]!;
          const due = Math.floor((job.index * plan.calls.length) / batchPlan.length);
          await pollUntil(() => next >= due || next >= plan.calls.length || Date.now() >= loadDeadline, o.durationMs, 100);
          batchJobsActive++;
          try {
            batchResults.push(await runBatchJob(job, { apis: readyApis, key: batchKeys[job.user]!, images: imageBytes, stats: tusStats, retryForMs: submitRetryMs, waitMs: batchWaitMs, stopWaiting: () => false }));
          } finally {
            batchJobsActive--;
          }
        }
      }),
    );
    await Promise.all(
      Array.from({ length: o.clients }, async () => {
        for (;;) {
          if (Date.now() >= loadDeadline) return;
          if (next >= plan.calls.length) return;
          await gate(next);
          const i = next++;
          if (i >= plan.calls.length) return;
          results[i] = await runCall(plan.calls[i]!, {
            apis: readyApis,
            keyOf: (u) => keys[u]!,
            timeoutMs: o.clientTimeoutMs,
            maxAttempts: MAX_ATTEMPTS,
            retryForMs: o.clientTimeoutMs + o.temporalOutageMs + RETRY_BEYOND_OUTAGE_MS,
            inFlight: (url, d) => inFlight.set(url, (inFlight.get(url) ?? 0) + d),
          });
          done++;
        }
      }),
    );
    const loadMs = Date.now() - loadStart;
    phases.load = loadMs;
    loadOver = true;
    const probes = judgeProbes(await consoleProbes);
    failures.push(...probes.failures);
    const settleStart = Date.now();
    clearInterval(progress);

    // --- the faults stop; every workflow ends -------------------------------------------------
    stopper.stop();
    // A fault under way (an outage) ends before the settling starts; one not yet due never fires.
    await Promise.all([weather, killLoop, restartFaults]);
    if (services.temporalServer && !services.temporalServer.isRunning) await services.temporalServer.restart();
    if (services.postgres && !services.postgres.isRunning) await services.postgres.restart();
    pgProxy.setFaults(null);
    redisProxy.setFaults(null);
    sim.setBehaviour('all', { failRate: 0, latencyMs: 0 });
    // Restarts under way go on; what matters now is one worker polling.
    if (!(await pollUntil(() => workers!.readySlots().length > 0, READY_TIMEOUT_MS))) await workers.start(0);
    log(`load done in ${(loadMs / 1000).toFixed(1)} s; faults stopped; ${workers.aliveSlots().length} worker(s) running`);

    const wfIds = [...new Set(plan.calls.filter((_, i) => results[i]).map(workflowIdOf))];
    const status = new Map<string, string>();
    const describeAll = async (ids: string[]) => {
      let k = 0;
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (k < ids.length) {
          const id = ids[k++]!;
          try {
            status.set(id, (await temporal.workflow.getHandle(id).describe()).status.name);
          } catch (err) {
            if (err instanceof WorkflowNotFoundError) status.set(id, 'NONE');
            else throw err;
          }
        }
      }));
    };
    await describeAll(wfIds);
    const running = () => wfIds.filter((id) => status.get(id) === 'RUNNING');
    await pollUntil(async () => {
      const r = running();
      if (!r.length) return true;
      await describeAll(r);
      return running().length === 0;
    }, o.workflowTimeoutMs + 15_000, 1_000);
    const stragglers = running();
    // The batch clients follow their batches to the end (bounded); then every batch of the run
    // must have ended in the database too (the console's are followed there).
    await batchLoad;
    const cutBatches = await Promise.all(extraBatches);
    const allBatchResults = [...batchResults, ...cutBatches, ...consoleBatches];
    const batchesEnded = await pollUntil(async () => {
      const r = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM batches WHERE user_id = ANY($1) AND status NOT IN ('completed', 'cancelled')`, [accounts]);
      return r.rows[0]!.n === 0;
    }, batchWaitMs, 1_000);
    if (!batchesEnded) log('!! batches still not ended after the wait');
    for (const id of stragglers) await temporal.workflow.getHandle(id).terminate('chaos: still running after the load and the faults stopped');
    if (stragglers.length) await describeAll(stragglers);

    // --- past every expiry, the sweeper once --------------------------------------------------
    const openRes = await db.query<{ n: number; wait_ms: number | null }>(
      `SELECT count(*)::int AS n, ceil(extract(epoch FROM max(expires_at) - now()) * 1000)::int AS wait_ms
         FROM reservations WHERE user_id = ANY($1) AND status = 'open'`,
      [accounts],
    );
    const openBefore = openRes.rows[0]!.n;
    const waitMs = Math.max(0, openRes.rows[0]!.wait_ms ?? 0) + 250;
    if (openBefore) {
      log(`${openBefore} reservation(s) open after every workflow ended: waiting ${waitMs} ms for their expiry, then one sweep`);
      await sleep(Math.min(waitMs, o.reservationTtlMs + 1_000));
    }
    const swept = await sweepExpired(db);
    log(`sweeper: closed ${swept.ids.length} expired reservation(s)`);

    phases.settle = Date.now() - settleStart;

    // --- stop the processes -------------------------------------------------------------------
    const stopStart = Date.now();
    await Promise.all([apis.stopAll(API_SHUTDOWN_GRACE_MS + 20_000), workers.stopAll(WORKER_SHUTDOWN_GRACE_MS + 15_000), consoles.stopAll(API_SHUTDOWN_GRACE_MS + 20_000)]);
    phases.stop = Date.now() - stopStart;

    // --- the checks ---------------------------------------------------------------------------
    const books = await checkBooks({ db, accountIds: accounts, calls: plan.calls, results, workflowIdOf });
    failures.push(...books.failures);
    const blobs = await checkBlobs({ db, accountIds: accounts, blobDir: services.blobDir });
    failures.push(...blobs.failures);
    const batchCheck = await checkBatches(db, [...batchAccountIds, ...(person ? [person.workspaceId] : [])], allBatchResults);
    failures.push(...batchCheck.failures);
    const notFollowed = allBatchResults.filter((r) => r.batchId && !consoleBatches.includes(r) && r.status !== 'completed' && r.status !== 'cancelled');
    if (notFollowed.length) failures.push(`${notFollowed.length} batch(es) whose client stopped waiting before they ended: ${notFollowed.slice(0, 5).map((r) => `${r.batchId} ${r.status}`).join(', ')}`);
    const notSentBatches = batchPlan.length - batchResults.length;
    if (notSentBatches) failures.push(`${notSentBatches} planned batch(es) not sent within --duration ${o.durationMs / 1000} s`);
    // A tus request is answered like any other: 503 with Retry-After while a part is away, never a 500.
    const tus500 = Object.entries(tusStats.byStatus).filter(([k]) => /(^| )500$/.test(k));
    if (tus500.length) failures.push(`tus requests answered 500: ${tus500.map(([k, n]) => `${k} ×${n}`).join(', ')}`);
    if (tusStats.noRetryAfter) failures.push(`${tusStats.noRetryAfter} tus answer(s) 503 without Retry-After`);
    const cutFailed = cutUploads.filter((c) => c.error);
    if (cutFailed.length) failures.push(`${cutFailed.length} upload(s) cut by a SIGKILL not finished through the other replica: ${cutFailed.map((c) => `${c.kind}: ${c.error}`).join('; ')}`);
    const cutMidway = cutUploads.filter((c) => c.offsetAtKill !== undefined);
    if (stragglers.length) failures.push(`${stragglers.length} workflow(s) had not ended ${(o.workflowTimeoutMs + 15_000) / 1000} s after the load; the suite terminated them: ${stragglers.slice(0, 5).join(', ')}`);
    const missedFaults = schedule.length - fired;
    if (missedFaults) failures.push(`${missedFaults} scheduled fault(s) never fired (the load ended first)`);

    const answered = results.filter((r): r is CallResult => r !== undefined);
    const outcomes: Record<string, number> = {};
    const bump = (k: string) => (outcomes[k] = (outcomes[k] ?? 0) + 1);
    const hangs: string[] = [];
    const malformed: string[] = [];
    const unanswered: string[] = [];
    for (const r of answered) {
      const f = r.final;
      if (f.kind === 'answer') {
        if ('creditsCharged' in f) bump(f.cacheHit ? '200 cache hit' : f.creditsCharged > 0 ? '200 analyzed, charged' : '200 analyzed, 0 credits');
        else bump(`${f.status} ${f.code}`);
      } else {
        bump(f.kind);
        if (f.kind === 'timeout') hangs.push(`#${r.call.index} ${r.call.kind}`);
        if (f.kind === 'malformed') malformed.push(`#${r.call.index} ${f.status}: ${f.detail}`);
        if (f.kind === 'unanswered') unanswered.push(`#${r.call.index}: ${f.detail}`);
      }
    }
    if (hangs.length) failures.push(`${hangs.length} call(s) got no answer within ${o.clientTimeoutMs} ms: ${hangs.slice(0, 5).join(', ')}`);
    if (malformed.length) failures.push(`${malformed.length} answer(s) neither a success nor an error envelope: ${malformed.slice(0, 5).join('; ')}`);
    if (unanswered.length) failures.push(`${unanswered.length} call(s) unanswered after ${(o.clientTimeoutMs + o.temporalOutageMs + RETRY_BEYOND_OUTAGE_MS) / 1000} s of attempts: ${unanswered.slice(0, 5).join('; ')}`);
    const notSent = plan.calls.length - answered.length;
    if (notSent) failures.push(`${notSent} planned call(s) not sent within --duration ${o.durationMs / 1000} s`);

    const attempts = answered.flatMap((r) => r.attempts);
    // While Temporal or Postgres is down, an attempt is answered 503 with Retry-After (or a 2xx/4xx
    // that needed neither); never a 500, never a hang. A 503 anywhere carries Retry-After.
    const down = (a: (typeof attempts)[number]) => downWindows.find((w) => a.from < w.to && a.to > w.from);
    const duringOutage: Record<string, number> = {};
    const outage500: string[] = [];
    const w500: BatchResult[] = [];
    const noRetryAfter: string[] = [];
    for (const r of answered) {
      for (const a of r.attempts) {
        const w = down(a);
        const label = a.status ? `${a.status}${a.code ? ' ' + a.code : ''}` : (a.network ?? 'no answer');
        if (w) duringOutage[label] = (duringOutage[label] ?? 0) + 1;
        if (w && (a.status === 500 || a.network === 'client timeout')) outage500.push(`#${r.call.index} ${label} while ${w.kind} was down`);
        if (a.status === 503 && !a.retryAfter) noRetryAfter.push(`#${r.call.index}`);
      }
    }
    // The batch submissions too: during a down window 503 with Retry-After (or an answer that needed neither).
    for (const r of allBatchResults) {
      for (const a of r.attempts) {
        const w = downWindows.find((d) => a.from < d.to && a.to > d.from);
        const label = a.status ? `${a.status}${a.code ? ' ' + a.code : ''}` : (a.network ?? 'no answer');
        if (w) duringOutage[`batch ${label}`] = (duringOutage[`batch ${label}`] ?? 0) + 1;
        if (w && (a.status === 500 || a.network === 'client timeout')) outage500.push(`batch #${r.job.index} ${label} while ${w.kind} was down`);
        if (a.status === 503 && !a.retryAfter) noRetryAfter.push(`batch #${r.job.index}`);
      }
      if (r.attempts.some((a) => a.status === 500)) w500.push(r);
    }
    if (w500.length) failures.push(`${w500.length} batch submission(s) answered 500: ${w500.slice(0, 5).map((r) => `#${r.job.index}`).join(', ')}`);
    if (outage500.length) failures.push(`${outage500.length} attempt(s) answered 500 or not at all while Temporal or Postgres was down: ${outage500.slice(0, 5).join('; ')}`);
    if (noRetryAfter.length) failures.push(`${noRetryAfter.length} 503 answer(s) without Retry-After: ${noRetryAfter.slice(0, 5).join(', ')}`);
    const slowestAttemptMs = attempts.reduce((m, a) => Math.max(m, a.ms), 0);
    const network: Record<string, number> = {};
    for (const a of attempts) if (a.network) network[a.network] = (network[a.network] ?? 0) + 1;
    const retried = answered.filter((r) => r.attempts.length > 1).length;
    const latencies = answered.filter((r) => r.final.kind === 'answer').map((r) => r.attempts.reduce((n, a) => n + a.ms, 0));
    const repeats = answered.filter((r) => r.call.kind === 'repeat' && r.final.kind === 'answer' && r.final.status === 200);
    const repeatHits = repeats.filter((r) => r.final.kind === 'answer' && 'cacheHit' in r.final && r.final.cacheHit).length;

    const wfCounts: Record<string, number> = {};
    for (const id of wfIds) wfCounts[status.get(id) ?? '?'] = (wfCounts[status.get(id) ?? '?'] ?? 0) + 1;
    const stillRunning = wfIds.filter((id) => status.get(id) === 'RUNNING');
    if (stillRunning.length) failures.push(`${stillRunning.length} workflow(s) still running after termination`);

    const crashes = [...workers.crashes, ...apis.crashes, ...consoles.crashes];
    for (const c of crashes) failures.push(`${c.name} exited on its own (code ${c.code}, signal ${c.signal}): ${c.tail.slice(-3).join(' | ')}`);
    failures.push(...apiShutdownOverruns);
    const allProcs = [...workers.exits, ...apis.exits, ...consoles.exits];
    const sweeperFailures = await countInLogs(logDir, /sweeper failed/);
    const sweeperPasses = await countInLogs(logDir, /sweeper (released|closed)/);
    const apiErrors = await countInLogs(logDir, /"level":50/, 'api-');

    const pg: FaultProxyStats = pgProxy.stats();
    const rd: FaultProxyStats = redisProxy.stats();
    const simStats = sim.stats();
    const vendorCalls = VENDORS.reduce((n, v) => n + simStats[v].calls, 0);
    const failedBy: Record<string, number> = {};
    for (const v of VENDORS) for (const [m, n] of Object.entries(simStats[v].failed)) if (n) failedBy[m] = (failedBy[m] ?? 0) + n;
    const vendorFailures = Object.values(failedBy).reduce((a, b) => a + b, 0);

    const fmt = (rec: Record<string, number>) => Object.entries(rec).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
    lines.push(
      `seed ${o.seed}: ${o.calls} calls, ${o.clients} clients, ${o.users} users, ${o.workers} workers, ${o.apis} API processes; ` +
        `workflow timeout ${o.workflowTimeoutMs / 1000} s, reservation TTL ${o.reservationTtlMs / 1000} s`,
      `load: ${answered.length} calls in ${(loadMs / 1000).toFixed(1)} s (${(answered.length / (loadMs / 1000)).toFixed(1)}/s); latency p50 ${pct(latencies, 50)} ms, p99 ${pct(latencies, 99)} ms, max ${pct(latencies, 100)} ms`,
      `outcomes: ${fmt(outcomes)}`,
      `attempts: ${attempts.length} for ${answered.length} calls (${retried} calls retried with the same x-request-id); ` +
        `by status: ${fmt(Object.fromEntries(Object.entries(groupCount(attempts.filter((a) => a.status).map((a) => `${a.status}${a.code ? ' ' + a.code : ''}`)))))}; connection errors: ${fmt(network)}`,
      `repeats answered 200: ${repeats.length}, of them cache hits ${repeatHits}`,
      `workers: ${counts.workerKills} SIGKILLed (${counts.allDown} times all at once), ${counts.sigterms} SIGTERMed, ${workers.starts} starts ` +
        `(spawn to polling p50 ${pct(workers.readyTimes, 50)} ms, max ${pct(workers.readyTimes, 100)} ms); ` +
        `API: ${restartCounts['api-term'] ?? 0} SIGTERM, ${restartCounts['api-kill'] ?? 0} SIGKILL, ${apis.starts} starts; unexpected exits: ${crashes.length}`,
      `restarts: ${fmt(restartCounts)} (of ${schedule.length} scheduled); API SIGKILLs with requests in flight on the killed process: ${apiKilledInFlight.join(', ') || 'none'}; ` +
        `down windows: ${downWindows.map((w) => `${w.kind} ${((w.to - w.from) / 1000).toFixed(1)} s`).join(', ') || 'none'}`,
      `during the down windows: ${fmt(duringOutage)}; slowest attempt ${slowestAttemptMs} ms, slowest call (all attempts) ${pct(latencies, 100)} ms`,
      `postgres proxy: ${pg.accepted} connections, ${pg.resets} reset mid-life + ${pg.acceptResets} at accept, ${pg.stalls} stalled; ` +
        `redis proxy: ${rd.accepted} connections, ${rd.resets} + ${rd.acceptResets} reset, ${rd.stalls} stalled`,
      `vendors (sim): ${vendorCalls} calls, ${vendorFailures} failed (${vendorCalls ? ((100 * vendorFailures) / vendorCalls).toFixed(1) : 0}%): ${fmt(failedBy)}; ` +
        `aborted ${VENDORS.reduce((n, v) => n + simStats[v].aborted, 0)}; ${counts.weatherChanges} failure-mode windows, ${counts.stallBursts} stall bursts`,
      `workflows: ${wfIds.length} request ids → ${fmt(wfCounts)}; terminated by the suite at the end: ${stragglers.length}`,
      `sweeper: workers' passes that closed reservations ${sweeperPasses}, passes failed (Postgres faults) ${sweeperFailures}; ` +
        `open after every workflow ended: ${openBefore}; the final sweep closed ${swept.ids.length}`,
      `phases: startup ${(phases.startup / 1000).toFixed(1)} s, load ${(phases.load / 1000).toFixed(1)} s, ` +
        `every workflow ended + expiry + sweep ${(phases.settle / 1000).toFixed(1)} s, stop ${(phases.stop / 1000).toFixed(1)} s`,
      `batch clients: ${batchResults.length} of ${batchPlan.length} planned batches sent (${batchResults.filter((r) => r.batchId).length} accepted), ` +
        `${cutBatches.length + consoleBatches.length} more over uploads cut by a kill; batch jobs under way as each fault fired: ${batchJobsAtFault.join(', ') || 'none'}; followed to the end: ${allBatchResults.filter((r) => r.status === 'completed' || r.status === 'cancelled').length}; ` +
        `submissions ${allBatchResults.reduce((n, r) => n + r.attempts.length, 0)} (by status: ${fmt(groupCount(allBatchResults.flatMap((r) => r.attempts.map((a) => (a.status ? `${a.status}${a.code ? ' ' + a.code : ''}` : (a.network ?? '?'))))))})`,
      ...batchCheck.lines,
      `uploads (tus): ${tusStats.requests} requests (${fmt(tusStats.byStatus)}); PATCHes resumed after a HEAD ${tusStats.resumes}, creations made again ${tusStats.recreated}, 503s without Retry-After ${tusStats.noRetryAfter}; ` +
        `cut by a SIGKILL and finished through the other replica: API ${cutMidway.filter((c) => c.kind === 'api').length}, console ${cutMidway.filter((c) => c.kind === 'console').length} ` +
        `(offset at the kill of the upload's size: ${cutMidway.map((c) => `${c.offsetAtKill}/${c.size}`).join(', ') || 'none'}); not finished ${cutFailed.length}`,
      probes.line,
      `consoles: ${o.consoles} processes, ${restartCounts['console-kill'] ?? 0} SIGKILLed mid-upload, ${consoles.starts} starts; unexpected exits: ${consoles.crashes.length}`,
      `logs: ${apiErrors} API error lines, ${allProcs.length} process exits; ${services.runDir}`,
      ...books.lines,
      ...blobs.lines,
    );
    const figures: ChaosReport['figures'] = {
      sent: answered.length,
      answered: answered.filter((r) => r.final.kind === 'answer').length,
      outcomes,
      attempts: attempts.length,
      workerKills: counts.workerKills,
      allDown: counts.allDown,
      workerStarts: workers.starts,
      apiKills: restartCounts['api-kill'] ?? 0,
      consoleKills: restartCounts['console-kill'] ?? 0,
      consoleRequests: probes.byStatus,
      resumedUploads: cutMidway.length,
      batches: batchCheck.byStatus,
      batchItems: batchCheck.items,
      restarts: restartCounts,
      duringOutage,
      slowestAttemptMs,
      slowestCallMs: pct(latencies, 100),
      missingBlobs: blobs.missing,
      terminated: stragglers.length,
      pgResets: pg.resets + pg.acceptResets,
      redisResets: rd.resets + rd.acceptResets,
      stalls: pg.stalls + rd.stalls,
      vendorCalls,
      vendorFailures,
      workflows: wfCounts,
      crashes: crashes.length,
      books: books.figures,
    };
    lines.push(failures.length ? `FAILED: ${failures.length} check(s)` : 'OK: every check passed');
    for (const f of failures) lines.push(`  ✗ ${f}`);
    await writeFile(path.join(services.runDir, 'report.txt'), lines.join('\n') + '\n');
    return { ok: failures.length === 0, failures, lines, figures };
  } finally {
    stopper.stop();
    if (workers) workers.supervising = false;
    if (apis) apis.supervising = false;
    if (consoles) consoles.supervising = false;
    const everyProc = [...(workers?.procs ?? []), ...(apis?.procs ?? []), ...(consoles?.procs ?? [])];
    for (const p of everyProc) p?.kill('SIGKILL');
    await Promise.allSettled(everyProc.map((p) => p?.exited));
    await mail?.close();
    await pgProxy.close();
    await redisProxy.close();
    await sim.close();
    await connection.close();
    await db.end();
  }
}

/**
 * The workflow code bundled once (webpack takes seconds of CPU), cached under a hash of every file
 * it is built from and of the installed packages (tools/scripts/workflow-bundle.ts, shared with the
 * test harness: the chaos test reuses the run's bundle).
 */
async function workflowBundle(): Promise<string> {
  return readFile((await ensureWorkflowBundle()).path, 'utf8');
}

function groupCount(items: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[i] = (out[i] ?? 0) + 1;
  return out;
}

async function countInLogs(dir: string, pattern: RegExp, prefix = ''): Promise<number> {
  let n = 0;
  for (const f of await readdir(dir)) {
    if (!f.startsWith(prefix)) continue;
    for (const line of (await readFile(path.join(dir, f), 'utf8')).split('\n')) if (pattern.test(line)) n++;
  }
  return n;
}

/**
 * A console person made as a browser makes one (test/web/people.ts does the same for the tests):
 * sign up, follow the mailed link, sign in; their session cookie and personal workspace.
 */
async function consolePerson(base: string, email: string, mail: Awaited<ReturnType<typeof startMailCatcher>>): Promise<{ cookie: string; workspaceId: string; origin: string; email: string; password: string }> {
  const password = 'lantern orbit cactus violin';
  const post = (p: string, body: unknown) =>
    fetch(`${base}${p}`, { method: 'POST', headers: { origin: base, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const up = await post('/api/v1/auth/sign-up/email', { name: 'Chaos', email, password });
  if (up.status !== 200) throw new Error(`console sign-up ${up.status}: ${await up.text()}`);
  const confirm = await mail.waitFor((m) => m.to.includes(email) && m.subject === 'Confirm your e-mail address for Lenstack', 60_000);
  await fetch(/https?:\/\/\S+/.exec(confirm.text)![0], { redirect: 'manual' });
  const signIn = await post('/api/v1/auth/sign-in/email', { email, password });
  if (signIn.status !== 200) throw new Error(`console sign-in ${signIn.status}: ${await signIn.text()}`);
  const cookie = signIn.headers.getSetCookie().map((c) => c.split(';')[0]!).join('; ');
  const session = (await (await fetch(`${base}/api/v1/session`, { headers: { cookie } })).json()) as { workspaces: Array<{ id: string }> };
  return { cookie, workspaceId: session.workspaces[0]!.id, origin: base, email, password };
}
