import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { freePort, startTemporalDevServer } from '../tools/scripts/temporal.ts';
import { startSimVendor, type SimVendorOptions } from '../tools/sim/index.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The service as `npm start` runs it, for the benches that measure its processes: a Temporal dev
 * server, the simulated vendors, a database of the bench's own (`lenstack_bench_<name>_<pid>`),
 * and the API and workers as child processes whose environment points at them. `close()` stops
 * every child, then the rest, and drops the database.
 */
export async function startProcessStack(name: string, opts: { sim?: SimVendorOptions; env?: Record<string, string> } = {}) {
  const databaseUrl = `postgres://postgres@127.0.0.1:5432/lenstack_bench_${name}_${process.pid}`;
  const blobDir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-bench-'));
  const temporal = await startTemporalDevServer({});
  const sim = await startSimVendor({ port: 0, ...opts.sim });
  await createDatabaseIfMissing(databaseUrl);
  await migrate(databaseUrl);
  const db = createPool(databaseUrl, { max: 5 });
  const env: Record<string, string | undefined> = {
    ...process.env,
    NODE_ENV: 'development',
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: `bench-${process.pid}`,
    REDIS_PREFIX: `lenstack-bench-${process.pid}:`,
    BLOB_DIR: blobDir,
    SIM_VENDOR_URL: sim.url,
    LOG_LEVEL: 'warn',
    OPENAI_API_KEY: '',
    ANTHROPIC_API_KEY: '',
    GEMINI_API_KEY: '',
    ...opts.env,
  };
  const children: ChildProcess[] = [];

  /** Starts `script` (a worker) and resolves once its output matches `ready`. */
  function start(script: string, extra: Record<string, string>, ready: RegExp): Promise<ChildProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    return new Promise((resolve, reject) => {
      let out = '';
      const on = (d: Buffer) => {
        out += d.toString();
        if (ready.test(out)) resolve(child);
      };
      child.stdout!.on('data', on);
      child.stderr!.on('data', on);
      child.once('exit', (code) => reject(new Error(`${script} exited (${code}): ${out.slice(-1000)}`)));
    });
  }

  /** An API process on a free port, once its health check answers; `base` is its URL. */
  async function startApi(extra: Record<string, string> = {}): Promise<{ child: ChildProcess; base: string }> {
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'api/server.ts'], { cwd: ROOT, env: { ...env, PORT: String(port), HOST: '127.0.0.1', ...extra }, stdio: 'ignore' });
    children.push(child);
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 120_000;
    while (!(await fetch(`${base}/v1/health`).then((r) => r.ok, () => false))) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error('the API did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
    return { child, base };
  }

  const stop = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null ? r() : (c.once('exit', () => r()), c.kill('SIGTERM'))));

  async function close(): Promise<void> {
    for (const c of children.reverse()) await stop(c);
    await db.end();
    await sim.close();
    await temporal.stop();
    await dropDatabase(databaseUrl);
    await rm(blobDir, { recursive: true, force: true });
  }

  return { root: ROOT, db, sim, env, start, startApi, stop, close };
}
