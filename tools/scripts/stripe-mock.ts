/**
 * Stripe's own API mock (github.com/stripe/stripe-mock), the Stripe stand-in for tests: built from
 * source with `go install` through the Go module proxy (like the temporal CLI) and cached in
 * ~/.cache/lenstack. It answers every Stripe API route from Stripe's OpenAPI document, so the
 * official `stripe` SDK is exercised at the wire.
 *
 *   npx tsx tools/scripts/stripe-mock.ts     # prints the path of the binary, building it if needed
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, constants, mkdir, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { isMain } from './is-main.ts';
import { freePort } from './temporal.ts';

export const STRIPE_MOCK_VERSION = '0.203.0';

export function stripeMockPath(env: NodeJS.ProcessEnv = process.env): string {
  const cacheHome = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(cacheHome, 'lenstack', `stripe-mock-${STRIPE_MOCK_VERSION}`, 'stripe-mock');
}

async function findGo(env: NodeJS.ProcessEnv): Promise<string> {
  for (const dir of [...(env.PATH ?? '').split(':').filter(Boolean), '/usr/local/go/bin']) {
    const candidate = join(dir, 'go');
    if (await access(candidate, constants.X_OK).then(() => true, () => false)) return candidate;
  }
  throw new Error('stripe-mock is not built and there is no Go toolchain to build it (install Go, or set PATH)');
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** The path of the pinned stripe-mock, built into the cache when missing. */
export async function ensureStripeMock(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const target = stripeMockPath(env);
  if (await access(target, constants.X_OK).then(() => true, () => false)) return target;
  const go = await findGo(env);
  const dir = join(target, '..');
  await mkdir(dir, { recursive: true });
  // Into a private directory, then renamed: concurrent builds never see half a binary.
  const gobin = join(dir, `.build-${process.pid}-${randomBytes(4).toString('hex')}`);
  const { code, output } = await run(go, ['install', `github.com/stripe/stripe-mock@v${STRIPE_MOCK_VERSION}`], { ...env, GOBIN: gobin, GOFLAGS: '-buildvcs=false' });
  if (code !== 0) throw new Error(`go install stripe-mock failed (${code}): ${output.slice(-1000)}`);
  await rename(join(gobin, 'stripe-mock'), target);
  await rm(gobin, { recursive: true, force: true });
  return target;
}

export interface StripeMock {
  /** http://127.0.0.1:<port>, for STRIPE_API_URL. */
  url: string;
  stop(): Promise<void>;
}

/** Starts stripe-mock on a free loopback port and waits until it answers. */
export async function startStripeMock(): Promise<StripeMock> {
  const bin = await ensureStripeMock();
  const port = await freePort();
  const child: ChildProcess = spawn(bin, ['-http-addr', `127.0.0.1:${port}`], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const ok = await fetch(`${url}/v1/balance`, { headers: { authorization: 'Bearer sk_test_123' } }).then((r) => r.ok, () => false);
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`stripe-mock did not answer on ${url}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

if (isMain(import.meta.url)) console.log(await ensureStripeMock());
