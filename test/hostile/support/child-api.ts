import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../../core/config.ts';

/** Starts test/hostile/support/api-process.ts as a child process and speaks its IPC protocol. */

export interface ApiProcess {
  url: string;
  pid: number;
  /** Current and peak (high-water) resident set size of the API process, bytes. */
  memory(): Promise<{ rss: number; maxRss: number }>;
  /** Null while running; the exit code or signal once it died. */
  exited(): { code: number | null; signal: NodeJS.Signals | null } | null;
  stderr(): string;
  stop(): Promise<void>;
}

const ENTRY = fileURLToPath(new URL('./api-process.ts', import.meta.url));

/** The environment variables api-process.ts needs, from the parent's parsed config. */
function envOf(config: Config): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: config.DATABASE_URL,
    REDIS_URL: config.REDIS_URL,
    REDIS_PREFIX: config.REDIS_PREFIX,
    BLOB_DIR: config.BLOB_DIR,
    IMAGE_MAX_BYTES: String(config.IMAGE_MAX_BYTES),
    IMAGE_MAX_PIXELS: String(config.IMAGE_MAX_PIXELS),
    HEIC_DECODER: config.HEIC_DECODER,
    ...(config.HEIC_DECODER_PATH ? { HEIC_DECODER_PATH: config.HEIC_DECODER_PATH } : {}),
    MAX_BODY_BYTES: String(config.MAX_BODY_BYTES),
    // The real pipeline: the harness's Temporal, this file's task queue, the simulated vendor.
    ...(config.TEMPORAL_ADDRESS ? { TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS } : {}),
    TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE: config.TEMPORAL_TASK_QUEUE,
    VENDOR_ORDER: config.VENDOR_ORDER.join(','),
    ...(config.SIM_VENDOR_URL ? { SIM_VENDOR_URL: config.SIM_VENDOR_URL } : {}),
    ...(config.INTERNAL_SECRET ? { INTERNAL_SECRET: config.INTERNAL_SECRET } : {}),
  };
}

export async function startApiProcess(config: Config): Promise<ApiProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', ENTRY], {
    // PATH only for the tools the API spawns (exiftool's perl); config comes from envOf alone.
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...envOf(config) },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
  let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exited = new Promise<void>((resolve) => child.once('exit', (code, signal) => ((exit = { code, signal }), resolve())));

  let nextId = 0;
  const waiting = new Map<number, { resolve: (m: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  void exited.then(() => {
    for (const w of waiting.values()) w.reject(new Error(`API process died: ${JSON.stringify(exit)} ${stderr.slice(-2_000)}`));
    waiting.clear();
  });
  const ready = new Promise<number>((resolve, reject) => {
    child.on('message', (m: Record<string, unknown>) => {
      if (m.type === 'ready') return resolve(m.port as number);
      waiting.get(m.id as number)?.resolve(m);
      waiting.delete(m.id as number);
    });
    void exited.then(() => reject(new Error(`API process exited before it was ready: ${stderr.slice(-2_000)}`)));
  });
  const ask = (type: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      if (exit) return reject(new Error(`API process is gone (${JSON.stringify(exit)})`));
      const id = ++nextId;
      waiting.set(id, { resolve, reject });
      child.send({ type, id });
    });

  const port = await ready;
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    memory: async () => {
      const m = await ask('memory');
      return { rss: m.rss as number, maxRss: m.maxRss as number };
    },
    exited: () => exit,
    stderr: () => stderr,
    async stop() {
      if (exit) return;
      await ask('stop');
      await exited;
    },
  };
}
