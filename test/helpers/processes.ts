import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Config } from '../../core/config.ts';

/** A real service process (node --import tsx <script>) with its output kept for assertions. */
export interface ServiceProcess {
  child: ChildProcess;
  output(): string;
  /** stdout lines that are JSON (pino), parsed. */
  logLines(): Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
}

const running: ChildProcess[] = [];

/** The environment a child needs to join this test file's services; vendor keys blanked. */
export function serviceEnv(config: Config, extra: Record<string, string | number> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'test',
    DATABASE_URL: config.DATABASE_URL,
    REDIS_URL: config.REDIS_URL,
    REDIS_PREFIX: config.REDIS_PREFIX,
    TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE: config.TEMPORAL_TASK_QUEUE,
    BLOB_DIR: config.BLOB_DIR,
    SIM_VENDOR_URL: config.SIM_VENDOR_URL,
    INTERNAL_SECRET: config.INTERNAL_SECRET,
    OPENAI_API_KEY: '',
    ANTHROPIC_API_KEY: '',
    GEMINI_API_KEY: '',
    // A developer's shell must not change what the children do: one simulator, no fixed metrics
    // port shared by several workers, JSON lines for logLines().
    SIM_VENDOR_URL_IF_NO_KEYS: '',
    TEMPORAL_METRICS_BIND_ADDRESS: '',
    LOG_FORMAT: 'json',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
  };
  for (const [k, v] of Object.entries(extra)) env[k] = String(v);
  return env;
}

export function spawnService(script: 'api/server.ts' | 'worker/main.ts', env: NodeJS.ProcessEnv): ServiceProcess {
  let out = '';
  const child = spawn(process.execPath, ['--import', 'tsx', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  running.push(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, atMs: performance.now() })),
  );
  return {
    child,
    output: () => out,
    logLines: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    exited,
  };
}

/** Resolves with the first match of `pattern` in the process's output (event-driven, bounded). */
export function waitForOutput(proc: ServiceProcess, pattern: RegExp, timeoutMs = 60_000): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = pattern.exec(proc.output());
      if (!m) return false;
      done();
      resolve(m);
      return true;
    };
    const onExit = () => {
      done();
      reject(new Error(`process exited before printing ${pattern}:\n${proc.output().slice(-2000)}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no ${pattern} within ${timeoutMs} ms:\n${proc.output().slice(-2000)}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      proc.child.stdout!.off('data', check);
      proc.child.stderr!.off('data', check);
      proc.child.off('exit', onExit);
    };
    proc.child.stdout!.on('data', check);
    proc.child.stderr!.on('data', check);
    proc.child.once('exit', onExit);
    check();
  });
}

/** Wait for an API process to listen; returns its base URL. */
export async function apiUrl(api: ServiceProcess): Promise<string> {
  return (await waitForOutput(api, /Server listening at (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
}

export async function workerPolling(worker: ServiceProcess): Promise<void> {
  // Bundling the workflows takes 10–20 s on an idle core and over a minute on a 2-core machine at
  // load 30: this bounds a hung start, it does not time one.
  await waitForOutput(worker, /polling task queue/, 180_000);
}

/** SIGTERM, and SIGKILL after `killAfterMs` when given; resolves once the process is gone. */
export async function stopGracefully(child: ChildProcess, killAfterMs?: number): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  await exited;
  clearTimeout(timer);
}

/** afterAll: nothing this file started outlives it. */
export function killAll(): void {
  for (const c of running) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
