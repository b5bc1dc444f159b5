/**
 * Several API, worker and console processes on one machine, sharing one Postgres database, one
 * Redis, one Temporal namespace and one S3-compatible bucket: the replicated deployment of
 * docs/deployment.md without Docker. `npm run replicas` runs it for a person
 * (tools/replicas/main.ts); test/operations/replicas.test.ts runs its suite against it.
 *
 * Nothing here is test-only: each replica is the real entry point (`api/server.ts`,
 * `worker/main.ts`, `web/server.ts`) with the environment an operator would give it.
 */
import { mkdir } from 'node:fs/promises';
import { freePort } from '../scripts/temporal.ts';
import { ServiceProcess, waitApiReady, waitWorkerReady, type ExitRecord } from '../chaos/processes.ts';

export interface TopologyOptions {
  apis: number;
  workers: number;
  consoles: number;
  /**
   * What every replica shares: DATABASE_URL, REDIS_URL (and REDIS_PREFIX), TEMPORAL_ADDRESS,
   * TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE, BLOB_STORE=s3 with S3_*, INTERNAL_SECRET,
   * AUTH_SECRET, the vendors (or SIM_VENDOR_URL), SMTP_URL. Ports are chosen here.
   */
  env: NodeJS.ProcessEnv;
  /** One log file per process, named after it. */
  logDir: string;
  /** How long a process may take to become ready. */
  readyTimeoutMs?: number;
}

export interface Replica {
  readonly name: string;
  readonly url: string;
  process: ServiceProcess;
}

export interface Topology {
  apis: Replica[];
  workers: Replica[];
  consoles: Replica[];
  /** SIGKILL a replica and start it again on the same port; resolves once it is ready. */
  restart(replica: Replica, signal?: NodeJS.Signals): Promise<ExitRecord>;
  stop(): Promise<void>;
}

const BETTER_AUTH_HEALTH = '/api/v1/auth/ok';
/** Settings only the console reads (secrets among them): kept from the API and worker processes. */
const CONSOLE_ONLY = /^(STRIPE_|GITHUB_|GOOGLE_|SMTP_URL$|MAIL_FROM$|AUTH_SECRET$|WEB_URL$|DEV_MAILBOX$)/;

export async function startTopology(o: TopologyOptions): Promise<Topology> {
  await mkdir(o.logDir, { recursive: true });
  const timeout = o.readyTimeoutMs ?? 120_000;
  const base: NodeJS.ProcessEnv = { ...o.env };
  // A port of the caller's shell would be shared by every replica.
  for (const k of ['PORT', 'WEB_PORT', 'HOST', 'WORKER_METRICS_PORT', 'TEMPORAL_METRICS_BIND_ADDRESS']) delete base[k];

  // As docker-compose.yml does: payments, sign-in and mail settings reach the consoles only.
  const backend: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(base).filter(([k]) => !CONSOLE_ONLY.test(k)));
  const spawnOf = (kind: 'api' | 'worker' | 'web', name: string, port: number | undefined) => {
    if (kind === 'api') return new ServiceProcess(name, kind, 'api/server.ts', [], { ...backend, HOST: '127.0.0.1', PORT: String(port) }, o.logDir, port);
    if (kind === 'web') {
      // Each console replica says its own address in mail links unless the operator set one
      // address for all of them (WEB_URL, the load balancer's).
      const env = { ...base, HOST: '127.0.0.1', WEB_PORT: String(port), WEB_URL: base.WEB_URL ?? `http://127.0.0.1:${port}` };
      return new ServiceProcess(name, kind, 'web/server.ts', [], env, o.logDir, port);
    }
    return new ServiceProcess(name, kind, 'worker/main.ts', [], backend, o.logDir);
  };
  const readyOf = (r: Replica) =>
    r.process.kind === 'worker' ? waitWorkerReady(r.process, timeout) : waitApiReady(r.process, timeout, r.process.kind === 'web' ? BETTER_AUTH_HEALTH : '/v1/health');

  const all: Replica[] = [];
  const make = async (kind: 'api' | 'worker' | 'web', count: number): Promise<Replica[]> => {
    const made: Replica[] = [];
    for (let i = 0; i < count; i++) {
      const port = kind === 'worker' ? undefined : await freePort();
      const name = `${kind}-${i + 1}`;
      made.push({ name, url: port ? `http://127.0.0.1:${port}` : '', process: spawnOf(kind, name, port) });
    }
    all.push(...made);
    return made;
  };
  const topology: Topology = {
    apis: await make('api', o.apis),
    workers: await make('worker', o.workers),
    consoles: await make('web', o.consoles),
    async restart(replica, signal = 'SIGKILL') {
      replica.process.kill(signal);
      const exit = await replica.process.exited;
      replica.process = spawnOf(replica.process.kind as 'api' | 'worker' | 'web', replica.name, replica.process.port);
      if (!(await readyOf(replica))) throw new Error(`${replica.name} did not come back: ${replica.process.output().slice(-2000)}`);
      return exit;
    },
    async stop() {
      await Promise.all(all.map((r) => r.process.stop(15_000)));
    },
  };
  const ready = await Promise.all(all.map(async (r) => [r, await readyOf(r)] as const));
  const failed = ready.filter(([, ok]) => !ok).map(([r]) => r);
  if (failed.length > 0) {
    await topology.stop();
    throw new Error(failed.map((r) => `${r.name} did not become ready:\n${r.process.output().slice(-3000)}`).join('\n\n'));
  }
  return topology;
}
