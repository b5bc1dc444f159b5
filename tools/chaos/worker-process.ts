/**
 * A worker process for the chaos suite: the production `startWorker` (worker/main.ts), configured
 * from the environment like `npm run worker`, with two differences a chaos run needs:
 *   --bundle <file>    the workflow code bundled once by the driver, so a restarted worker polls
 *                      within a second or two instead of re-running webpack;
 *   --sweep-ms <n>     the reservation sweeper's period (production: 30 s), so the short
 *                      reservation TTL of a chaos run is actually swept while it runs.
 *   and it waits (up to 10 minutes) for Temporal to answer before starting, as a supervisor's
 *   readiness gate would: a worker restarted during a Temporal outage starts once it is back. A
 *   start that fails because Temporal went away between the wait and the start (the full run saw
 *   one: the outage began in that second) waits again, as the supervisor would restart it.
 * Prints "polling task queue" when ready. Exits when its stdin closes, so a driver that dies
 * (even by SIGKILL) leaves no worker behind.
 */
import { readFile } from 'node:fs/promises';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { interactiveTaskQueue, loadConfig } from '../../core/config.ts';
import { startWorker } from '../../worker/main.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from '../../worker/address.ts';
import { waitForTemporal } from '../scripts/temporal.ts';

function arg(name: string): string {
  const i = process.argv.indexOf(name);
  const value = i >= 0 ? process.argv[i + 1] : undefined;
  if (!value) {
    console.error(`chaos worker: missing ${name}`);
    process.exit(2);
  }
  return value;
}

const codePath = arg('--bundle');
const sweepIntervalMs = Number(arg('--sweep-ms'));
const config = loadConfig();
// Provoked activity failures are logged by the SDK at WARN; keep those (they go to the run's logs).
Runtime.install({ logger: new DefaultLogger('WARN') });
const code = await readFile(codePath, 'utf8');
const deadline = Date.now() + 600_000;
let running: Awaited<ReturnType<typeof startWorker>> | undefined;
while (!running) {
  await waitForTemporal(config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, { timeoutMs: Math.max(1_000, deadline - Date.now()) });
  try {
    running = await startWorker(config, { workflowBundle: { code }, sweepIntervalMs, log: (m) => console.log(`[worker] ${m}`) });
  } catch (err) {
    // Only Temporal gone again (a transport failure) is waited out; anything else is a crash.
    if ((err as Error).name !== 'TransportError' || Date.now() >= deadline) throw err;
    console.log(`[worker] Temporal went away while starting (${(err as Error).message.slice(0, 120)}); waiting for it again`);
  }
}
console.log(`[worker] polling task queue ${config.TEMPORAL_TASK_QUEUE} and ${interactiveTaskQueue(config)}`);
process.stdin.on('end', () => process.exit(3));
process.stdin.resume();
try {
  await running.done;
} catch (err) {
  console.error(`[worker] stopped with an error: ${(err as Error).stack ?? String(err)}`);
  process.exit(1);
}
process.exit(0);
