/**
 * Stripe's own API mock (github.com/stripe/stripe-mock), the Stripe stand-in for tests: built from
 * source with `go install` through the Go module proxy (like the temporal CLI) and cached in
 * ~/.cache/lenstack. It answers every Stripe API route from Stripe's OpenAPI document, so the
 * official `stripe` SDK is exercised at the wire.
 *
 *   npx tsx tools/scripts/stripe-mock.ts     # prints the path of the binary, building it if needed
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { ensureGoTool, goToolPath, type GoTool } from './go-tool.ts';
import { isMain } from './is-main.ts';
import { freePort } from './temporal.ts';

export const STRIPE_MOCK_VERSION = '0.203.0';
export const STRIPE_MOCK: GoTool = { name: 'stripe-mock', pkg: 'github.com/stripe/stripe-mock', version: STRIPE_MOCK_VERSION };

export const stripeMockPath = (env: NodeJS.ProcessEnv = process.env): string => goToolPath(STRIPE_MOCK, env);

/** The path of the pinned stripe-mock, built into the cache when missing. */
export const ensureStripeMock = (env: NodeJS.ProcessEnv = process.env): Promise<string> => ensureGoTool(STRIPE_MOCK, env);

export interface StripeMock {
  /** http://127.0.0.1:<port>, for STRIPE_API_URL. */
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts stripe-mock on a free loopback port and waits until it answers. It parses Stripe's whole
 * OpenAPI document before it listens, which takes seconds on a loaded 2-core machine: up to 60 s
 * are allowed, and a start that dies (another process took the port first) is tried again on a
 * fresh port.
 */
export async function startStripeMock(): Promise<StripeMock> {
  const bin = await ensureStripeMock();
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    // Both listeners get a free port: left alone, HTTPS takes :12112, and a second stripe-mock on
    // the machine (another run, a leftover) makes this one exit.
    const httpsPort = await freePort();
    const child: ChildProcess = spawn(bin, ['-http-addr', `127.0.0.1:${port}`, '-https-addr', `127.0.0.1:${httpsPort}`], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    let up = false;
    while (!up) {
      up = await fetch(`${url}/v1/balance`, { headers: { authorization: 'Bearer sk_test_123' } }).then((r) => r.ok, () => false);
      if (up) break;
      if (child.exitCode !== null || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (up) {
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
    const died = child.exitCode !== null;
    child.kill('SIGKILL');
    if (!died || attempt >= 3) throw new Error(`stripe-mock did not answer on ${url}${died ? ' (it exited)' : ' within 60 s'}: ${stderr.slice(-500)}`);
  }
}

if (isMain(import.meta.url)) console.log(await ensureStripeMock());
