/**
 * A real S3-compatible server for tests and local multi-host setups: Versity's versitygw (an S3
 * gateway in Go, Apache-2.0) over a POSIX directory, built with `go install` through the Go module
 * proxy and cached like the temporal CLI. It speaks S3's wire protocol with SigV4 authentication,
 * so the official @aws-sdk/client-s3 is exercised exactly as against AWS.
 *
 *   npx tsx tools/scripts/s3-server.ts     # prints the path of the binary, building it if needed
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureGoTool, type GoTool } from './go-tool.ts';
import { isMain } from './is-main.ts';
import { freePort } from './temporal.ts';

export const VERSITYGW: GoTool = { name: 'versitygw', pkg: 'github.com/versity/versitygw/cmd/versitygw', version: '1.8.0' };

export interface S3Server {
  /** http://127.0.0.1:<port>, for S3_ENDPOINT. */
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

/**
 * Starts versitygw on a free loopback port and waits until it answers: over fresh temporary
 * directories (removed by stop), or over `keep.dir` (kept: its buckets outlive the process) with
 * the keys given there.
 */
export async function startS3Server(keep?: { dir: string; accessKeyId: string; secretAccessKey: string }): Promise<S3Server> {
  const bin = await ensureGoTool(VERSITYGW);
  let root: string;
  let sidecar: string;
  if (keep) {
    [root, sidecar] = [join(keep.dir, 'data'), join(keep.dir, 'meta')];
    await mkdir(root, { recursive: true });
    await mkdir(sidecar, { recursive: true });
  } else {
    root = await mkdtemp(join(tmpdir(), 'lenstack-s3-'));
    sidecar = await mkdtemp(join(tmpdir(), 'lenstack-s3-meta-'));
  }
  const port = await freePort();
  const accessKeyId = keep?.accessKeyId ?? `lenstack${randomBytes(4).toString('hex')}`;
  const secretAccessKey = keep?.secretAccessKey ?? randomBytes(24).toString('hex');
  const child: ChildProcess = spawn(bin, ['--port', `127.0.0.1:${port}`, 'posix', '--sidecar', sidecar, root], {
    // Keys through the environment, not argv (which `ps` shows).
    env: { ...process.env, ROOT_ACCESS_KEY_ID: accessKeyId, ROOT_SECRET_ACCESS_KEY: secretAccessKey },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  // Any HTTP answer (403 without a signature) means it listens.
  while (!(await fetch(endpoint).then(() => true, () => false))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`versitygw did not answer on ${endpoint}: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    endpoint,
    accessKeyId,
    secretAccessKey,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      if (!keep) {
        await rm(root, { recursive: true, force: true });
        await rm(sidecar, { recursive: true, force: true });
      }
    },
  };
}

if (isMain(import.meta.url)) console.log(await ensureGoTool(VERSITYGW));
