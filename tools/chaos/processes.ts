import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const TAIL_LINES = 60;

/** Children still running: killed when this process exits, however it exits (short of SIGKILL). */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export type Kind = 'api' | 'worker' | 'web';

export interface ExitRecord {
  name: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when the driver asked for it (a kill or a stop); false = the process died on its own. */
  expected: boolean;
  tail: string[];
}

/**
 * One API or worker child process: output to a log file and a short in-memory tail, readiness,
 * and whether its exit was ours. Every wait here is bounded.
 */
export class ServiceProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<ExitRecord>;
  private expected = false;
  private out = '';
  private readonly tail: string[] = [];
  private readonly log: WriteStream;
  readonly spawnedAt = performance.now();
  /** Milliseconds from spawn to ready, once the driver saw it ready. */
  readyMs: number | undefined;

  constructor(
    readonly name: string,
    readonly kind: Kind,
    entry: string,
    args: string[],
    env: NodeJS.ProcessEnv,
    logDir: string,
    readonly port?: number,
  ) {
    this.log = createWriteStream(path.join(logDir, `${name}.log`), { flags: 'a' });
    // stdin is a pipe nobody writes to: the chaos worker exits when it closes (driver gone).
    this.child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdin!.on('error', () => {});
    live.add(this.child);
    const onData = (d: Buffer) => {
      const text = d.toString();
      this.log.write(text);
      if (this.out.length < 64 * 1024) this.out += text;
      for (const line of text.split('\n')) {
        if (!line) continue;
        this.tail.push(line.length > 400 ? `${line.slice(0, 400)}…` : line);
        if (this.tail.length > TAIL_LINES) this.tail.shift();
      }
    };
    this.child.stdout!.on('data', onData);
    this.child.stderr!.on('data', onData);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        live.delete(this.child);
        this.log.end();
        resolve({ name, code, signal, expected: this.expected, tail: [...this.tail] });
      });
    });
  }

  /** Alive, seen ready, and not being stopped (a draining API takes no new requests). */
  get ready(): boolean {
    return this.alive && this.readyMs !== undefined && !this.expected;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Early output (bounded), for readiness lines. */
  output(): string {
    return this.out;
  }

  kill(signal: NodeJS.Signals): void {
    this.expected = true;
    if (this.alive) this.child.kill(signal);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it is gone. */
  async stop(graceMs: number): Promise<ExitRecord> {
    this.kill('SIGTERM');
    const timer = setTimeout(() => this.kill('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Poll `check` every `intervalMs` until it is true or `timeoutMs` passes; returns whether it became true. */
export async function pollUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, intervalMs = 100): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The worker printed its polling line (or died first). */
export function waitWorkerReady(p: ServiceProcess, timeoutMs: number): Promise<boolean> {
  return pollUntil(() => !p.alive || p.output().includes('polling task queue'), timeoutMs, 50).then((ok) => markReady(p, ok));
}

/** The API answers GET /v1/health (or died first); the console, `path` (its sign-in service's health). */
export function waitApiReady(p: ServiceProcess, timeoutMs: number, path = '/v1/health'): Promise<boolean> {
  return pollUntil(
    async () => {
      if (!p.alive) return true;
      try {
        const res = await fetch(`http://127.0.0.1:${p.port}${path}`, { signal: AbortSignal.timeout(1_000) });
        await res.arrayBuffer();
        return res.status === 200;
      } catch {
        return false;
      }
    },
    timeoutMs,
    200,
  ).then((ok) => markReady(p, ok));
}

function markReady(p: ServiceProcess, ok: boolean): boolean {
  if (!ok || !p.alive) return false;
  p.readyMs = Math.round(performance.now() - p.spawnedAt);
  return true;
}
