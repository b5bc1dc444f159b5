/**
 * Temporal for development and tests: the `temporal server start-dev` process, readiness, and the
 * search attributes AnalyzeWorkflow needs.
 *
 *   npx tsx scripts/temporal.ts    # dev server on 127.0.0.1:7233, UI on :8233, state in .data/temporal.sqlite
 */
import { spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';
import { isMain } from './is-main.ts';
import { ensureTemporalCli } from './temporal-cli.ts';

const CLI_TYPE_NAMES: Record<SearchAttributeType, string> = {
  TEXT: 'Text',
  KEYWORD: 'Keyword',
  INT: 'Int',
  DOUBLE: 'Double',
  BOOL: 'Bool',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
};
const GRPC_ALREADY_EXISTS = 6;
const LOG_TAIL_LINES = 40;

/**
 * Server settings for a low-latency single-node cluster (docs/decisions.md, "Temporal latency"):
 * one task-queue partition, so a task never waits to be forwarded between partitions to reach the
 * poller that is already waiting, and eager activity dispatch, so the activity a workflow task
 * schedules comes back to this worker in the reply instead of through a second poll.
 */
export const LOW_LATENCY_DYNAMIC_CONFIG: Record<string, unknown> = {
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
  'system.enableActivityEagerExecution': true,
  // The dev server has one history shard, and each shard's queues read their tasks at most 20
  // times a second by default (sized for clusters of hundreds of shards): past ~20 task reads/s
  // every workflow task waits ~50 ms for the next read. One shard here gets a whole cluster's rate.
  'history.transferProcessorMaxPollRPS': 10_000,
  'history.timerProcessorMaxPollRPS': 10_000,
  'history.visibilityProcessorMaxPollRPS': 10_000,
};

export interface DevServerOptions {
  /** Frontend gRPC port; a free port when omitted. */
  port?: number;
  /** Web UI port; the UI is off (`--headless`) when omitted. */
  uiPort?: number;
  /** SQLite file for persistent state; in memory when omitted. */
  dbFile?: string;
  /** Namespace to create and wait for (default "default", which always exists). */
  namespace?: string;
  /** Append the server's output here (it is also kept in memory for error messages). */
  logFile?: string;
  /** Address to bind (default 127.0.0.1). */
  ip?: string;
  /** The temporal CLI to run; `ensureTemporalCli()` when omitted. */
  cliPath?: string;
  /** Bound on the wait for the frontend to answer (default 60 s). */
  readyTimeoutMs?: number;
}

export interface DevServer {
  /** host:port of the frontend, for TEMPORAL_ADDRESS. */
  address: string;
  uiUrl: string | null;
  /** Resolves with the exit code when the server process ends, for whatever reason. */
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL if it has not exited within 10 s. Safe to call twice. */
  stop(): Promise<void>;
  /** SIGKILL the server at once (no shutdown of its own), as a crash would; resolves once it is gone. */
  kill(): Promise<void>;
}

export class TemporalDevServerError extends Error {
  override name = 'TemporalDevServerError';
}

/**
 * Runs the server under a small sh watchdog that holds our pipe on its stdin: when we stop it,
 * or when this process dies in any way (even SIGKILL), stdin reaches EOF and the server gets
 * SIGTERM, so no dev server outlives its owner.
 */
const WATCHDOG = [
  'exec 3<&0',
  '"$@" </dev/null 3<&- &',
  'pid=$!',
  '{ cat >/dev/null; kill -TERM "$pid"; } <&3 >/dev/null 2>&1 &',
  'exec 3<&-',
  'wait "$pid"',
].join('\n');

export async function startTemporalDevServer(opts: DevServerOptions = {}): Promise<DevServer> {
  const cliPath = opts.cliPath ?? (await ensureTemporalCli());
  // With no port asked for, another process may grab the free port we picked before the server
  // binds it: try again on a fresh one.
  const attempts = opts.port === undefined ? 3 : 1;
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await freePort());
    try {
      return await startOnce(cliPath, port, opts);
    } catch (err) {
      if (attempt >= attempts || !(err instanceof PortInUseError)) throw err;
    }
  }
}

class PortInUseError extends TemporalDevServerError {}

async function startOnce(cliPath: string, port: number, opts: DevServerOptions): Promise<DevServer> {
  const ip = opts.ip ?? '127.0.0.1';
  const namespace = opts.namespace ?? 'default';
  const address = `${ip}:${port}`;
  const args = ['server', 'start-dev', '--ip', ip, '--port', String(port), '--log-format', 'text'];
  args.push(...(opts.uiPort === undefined ? ['--headless'] : ['--ui-port', String(opts.uiPort)]));
  if (opts.dbFile) {
    await mkdir(dirname(opts.dbFile), { recursive: true });
    args.push('--db-filename', opts.dbFile);
  }
  if (namespace !== 'default') args.push('--namespace', namespace);
  for (const [key, value] of Object.entries(LOW_LATENCY_DYNAMIC_CONFIG)) args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  for (const key of Object.values(SEARCH_ATTRIBUTES)) {
    args.push('--search-attribute', `${key.name}=${CLI_TYPE_NAMES[key.type]}`);
  }

  let logStream: WriteStream | undefined;
  if (opts.logFile) {
    await mkdir(dirname(opts.logFile), { recursive: true });
    logStream = createWriteStream(opts.logFile, { flags: 'a' });
  }
  const tail: string[] = [];
  const child = spawn('sh', ['-c', WATCHDOG, 'temporal-watchdog', cliPath, ...args], {
    detached: true, // own process group, so the SIGKILL fallback reaches the server too
    env: serverEnv(),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const onOutput = (chunk: Buffer) => {
    logStream?.write(chunk);
    tail.push(...chunk.toString().split('\n').filter((l) => l.trim()));
    tail.splice(0, Math.max(0, tail.length - LOG_TAIL_LINES));
  };
  child.stdout.on('data', onOutput);
  child.stderr.on('data', onOutput);
  child.on('close', () => logStream?.end());
  const exited = new Promise<number | null>((res) => {
    child.on('exit', (code) => {
      child.stdin.destroy(); // a server that ended by itself: release the watchdog's cat too
      res(code);
    });
    child.on('error', () => res(null));
  });

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end(); // the watchdog turns this into SIGTERM for the server
      const killTimer = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      }, 10_000);
      await exited;
      clearTimeout(killTimer);
    })());

  try {
    await waitForTemporal(address, namespace, {
      timeoutMs: opts.readyTimeoutMs ?? 60_000,
      exited,
      describeFailure: () => `temporal server start-dev (${cliPath}) output, last lines:\n${tail.join('\n')}`,
    });
  } catch (err) {
    await stop();
    if (/address already in use/i.test(tail.join('\n'))) {
      throw new PortInUseError(`port ${port} is already in use:\n${tail.join('\n')}`);
    }
    throw err;
  }
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, 'SIGKILL'); // the whole group: watchdog, server, cat
      } catch {
        // already gone
      }
    }
    await exited;
  };
  return { address, uiUrl: opts.uiPort === undefined ? null : `http://${ip}:${opts.uiPort}`, exited, stop, kill };
}

/** The server must not pick up our client settings (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, ...). */
function serverEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TEMPORAL_')));
}

export interface WaitForTemporalOptions {
  timeoutMs: number;
  /** Stop waiting early when the server process ends. */
  exited?: Promise<number | null>;
  /** Extra detail for the timeout error (a log tail). */
  describeFailure?: () => string;
}

/** Polls until the frontend at `address` answers describeNamespace(namespace), bounded by timeoutMs. */
export async function waitForTemporal(address: string, namespace: string, opts: WaitForTemporalOptions): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let exitCode: number | null | undefined;
  void opts.exited?.then((code) => (exitCode = code));
  let lastError: unknown;
  while (Date.now() < deadline && exitCode === undefined) {
    const connection = await connectIfTemporal(address, namespace, Math.min(2_000, deadline - Date.now())).catch(
      (err: unknown) => {
        lastError = err;
        return null;
      },
    );
    if (connection) {
      await connection.close();
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const why =
    exitCode !== undefined
      ? `the server exited (code ${exitCode}) before it answered`
      : `no answer within ${Math.round(opts.timeoutMs / 1000)} s (last error: ${(lastError as Error | undefined)?.message ?? 'none'})`;
  throw new TemporalDevServerError(
    `Temporal at ${address} is not ready: ${why}.${opts.describeFailure ? `\n${opts.describeFailure()}` : ''}`,
  );
}

/** A connection when `address` answers as Temporal and knows `namespace`; throws otherwise. */
export async function connectIfTemporal(address: string, namespace: string, timeoutMs: number): Promise<Connection> {
  // A gRPC subchannel of its own, not the one the process shares per address. `npm start` asks once
  // whether a server already runs (refused), builds the CLI for minutes, then polls the server it
  // started: on a fresh machine every poll of that process ended "Failed to connect before the
  // deadline" for 60 s while another process connected at once, twice out of two; with this, it
  // answered (docs/decisions.md, "The first npm start on a fresh machine").
  const connection = await Connection.connect({ address, connectTimeout: timeoutMs, channelArgs: { 'grpc.use_local_subchannel_pool': 1 } });
  try {
    await connection.withDeadline(Date.now() + timeoutMs, () =>
      connection.workflowService.describeNamespace({ namespace }),
    );
    return connection;
  } catch (err) {
    await connection.close();
    throw err;
  }
}

/**
 * Registers SEARCH_ATTRIBUTES on an existing cluster (TEMPORAL_ADDRESS). Idempotent and safe to
 * race: attributes already registered with the right type are left alone; a wrong type is an error.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const missing = await missingSearchAttributes(connection, namespace);
  if (Object.keys(missing).length === 0) return;
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
  } catch (err) {
    if ((err as { code?: number }).code !== GRPC_ALREADY_EXISTS) throw err;
  }
  const stillMissing = await missingSearchAttributes(connection, namespace);
  if (Object.keys(stillMissing).length > 0) {
    throw new TemporalDevServerError(
      `search attributes ${Object.keys(stillMissing).join(', ')} are still missing in namespace ${namespace} after registering them`,
    );
  }
}

async function missingSearchAttributes(connection: Connection, namespace: string): Promise<Record<string, number>> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing: Record<string, number> = {};
  for (const key of Object.values(SEARCH_ATTRIBUTES)) {
    const wanted = encodeSearchAttributeIndexedValueType(key.type)!;
    const existing = customAttributes?.[key.name];
    if (existing === undefined || existing === null) missing[key.name] = wanted;
    else if (existing !== wanted) {
      throw new TemporalDevServerError(
        `search attribute ${key.name} exists in namespace ${namespace} with indexed type ${existing}, but the workflows need ${key.type}`,
      );
    }
  }
  return missing;
}

/** Asks the OS for a free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const server = createServer();
    server.unref();
    server.on('error', rej);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => res(port));
    });
  });
}

function portAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((res) => {
    const socket = createConnection({ host, port });
    socket.setTimeout(1_000);
    socket.once('connect', () => (socket.destroy(), res(true)));
    socket.once('timeout', () => (socket.destroy(), res(false)));
    socket.once('error', () => res(false));
  });
}

async function main(): Promise<void> {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const host = '127.0.0.1';
  const port = 7233;
  const address = `${host}:${port}`;

  if (await portAnswers(host, port)) {
    const connection = await connectIfTemporal(address, 'default', 5_000).catch(() => null);
    if (!connection) {
      throw new TemporalDevServerError(`${address} is taken by something that does not answer as Temporal`);
    }
    await ensureSearchAttributes(connection, 'default');
    await connection.close();
    const ui = (await portAnswers(host, 8233)) ? `, UI on http://${host}:8233` : '';
    console.log(`Temporal is already running at ${address}${ui}: reusing it (search attributes checked), not starting another.`);
    return;
  }

  const logFile = resolve(root, '.data/temporal.log');
  const started = Date.now();
  const server = await startTemporalDevServer({
    port,
    uiPort: 8233,
    dbFile: resolve(root, '.data/temporal.sqlite'),
    logFile,
  });
  console.log(`Temporal dev server ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`  TEMPORAL_ADDRESS=${server.address}`);
  console.log(`  UI:  ${server.uiUrl}`);
  console.log(`  log: ${logFile}`);
  console.log('Ctrl-C stops it.');

  const shutdown = () => {
    console.log('stopping Temporal...');
    void server.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
  const code = await server.exited;
  console.error(`Temporal dev server exited unexpectedly (code ${code}); see ${logFile}`);
  process.exit(1);
}

if (isMain(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
