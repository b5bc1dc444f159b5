import { spawn, type ChildProcess } from 'node:child_process';
import type { Config } from '../../core/config.ts';

/**
 * A real worker process (tsx worker/main.ts) on the pipeline's task queue, for tests that kill
 * one. Every child is recorded in `children`, so the test can kill what is left in afterAll.
 */
export function spawnWorkerProcess(config: Config, children: ChildProcess[]): { child: ChildProcess; output: () => string } {
  let out = '';
  const env = {
    ...process.env,
    DATABASE_URL: config.DATABASE_URL,
    REDIS_URL: config.REDIS_URL,
    TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE: config.TEMPORAL_TASK_QUEUE,
    BLOB_DIR: config.BLOB_DIR,
    SIM_VENDOR_URL: config.SIM_VENDOR_URL,
    LOG_LEVEL: 'warn',
  };
  const child = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  children.push(child);
  return { child, output: () => out };
}
