/**
 * The parts a chaos run restarts, owned by the run alone (docs/reliability.md "Chaos"):
 *   - a PRIVATE Postgres cluster (initdb into a temp directory with the machine's
 *     /usr/lib/postgresql/<version>/bin, on a free port), stopped with `pg_ctl -m immediate` (no
 *     checkpoint, crash recovery at the next start) and started again. The machine's shared
 *     Postgres is never touched: other suites use it.
 *   - a Temporal dev server with its state in a SQLite file (--db-filename), SIGKILLed and started
 *     again on the same port and file, so workflows, timers and task queues survive it.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, startTemporalDevServer, type DevServer } from '../scripts/temporal.ts';

const run = promisify(execFile);

/** The newest Postgres server binaries on the machine (Debian's layout). */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(path.join(root, v, 'bin/pg_ctl'))) : [];
  if (!versions.length) throw new Error(`no Postgres server binaries under ${root}/*/bin (apt-get install postgresql)`);
  versions.sort((a, b) => Number(a) - Number(b));
  return path.join(root, versions[versions.length - 1]!, 'bin');
}

/** Private clusters still running: stopped when this process exits, however it exits (short of SIGKILL). */
const clusters = new Set<PrivatePostgres>();
process.once('exit', () => {
  for (const c of clusters) c.stopNowSync();
});

export class PrivatePostgres {
  private running = false;
  /** Immediate stops and starts done after the first start. */
  restarts = 0;

  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
    /** Postgres refuses to run as root: the OS user that owns the cluster, when we are root. */
    private readonly asUser: string | undefined,
  ) {}

  /** initdb into a fresh temp directory and start the cluster on a free loopback port. */
  static async start(opts: { parentDir?: string } = {}): Promise<PrivatePostgres> {
    const bin = postgresBinDir();
    const asUser = process.getuid?.() === 0 ? 'postgres' : undefined;
    const dir = await mkdtemp(path.join(opts.parentDir ?? tmpdir(), 'lenstack-chaos-pg-'));
    await mkdir(path.join(dir, 'data'));
    await mkdir(path.join(dir, 'sock'));
    if (asUser) {
      const { uid, gid } = userIds(asUser);
      for (const d of [dir, path.join(dir, 'data'), path.join(dir, 'sock')]) await chown(d, uid, gid);
    }
    const pg = new PrivatePostgres(dir, await freePort(), bin, asUser);
    // trust on loopback only: the cluster listens on 127.0.0.1 and lives for one run.
    await pg.exec('initdb', ['-D', pg.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    await pg.startServer();
    clusters.add(pg);
    return pg;
  }

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  /** A connection URL for `database` on this cluster. */
  url(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  get isRunning(): boolean {
    return this.running;
  }

  /**
   * `pg_ctl stop -m immediate`: every server process quits at once, without a checkpoint, as in a
   * power cut of the process tree (the next start runs crash recovery from the WAL).
   */
  async stopImmediate(): Promise<void> {
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '60', 'stop']);
    this.running = false;
  }

  /** Start again on the same port and data directory (crash recovery first after an immediate stop). */
  async restart(): Promise<void> {
    await this.startServer();
    this.restarts++;
  }

  /** Stop and remove the cluster. */
  async close(): Promise<void> {
    clusters.delete(this);
    if (this.running) await this.stopImmediate().catch(() => {});
    await rm(this.dir, { recursive: true, force: true });
  }

  /** For the exit hook: stop without waiting for anything else. */
  stopNowSync(): void {
    if (!this.running) return;
    try {
      execFileSync(...this.command('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', 'stop']), { stdio: 'ignore', timeout: 10_000 });
    } catch {
      // gone already
    }
  }

  private async startServer(): Promise<void> {
    // fsync off: a process crash (what we inject) loses nothing the OS already has; the machine
    // itself does not crash in a run. Enough connections for every API and worker pool at once.
    const options = [
      `-p ${this.port}`,
      '-c listen_addresses=127.0.0.1',
      `-c unix_socket_directories=${path.join(this.dir, 'sock')}`,
      '-c max_connections=300',
      '-c fsync=off',
      '-c full_page_writes=off',
    ].join(' ');
    await this.exec('pg_ctl', ['-D', this.dataDir, '-l', path.join(this.dir, 'postgres.log'), '-o', options, '-w', '-t', '120', 'start']);
    this.running = true;
  }

  private command(tool: string, args: string[]): [string, string[]] {
    const exe = path.join(this.bin, tool);
    return this.asUser ? ['runuser', ['-u', this.asUser, '--', exe, ...args]] : [exe, args];
  }

  private async exec(tool: string, args: string[]): Promise<void> {
    const [file, argv] = this.command(tool, args);
    try {
      await run(file, argv, { cwd: this.dir, timeout: 180_000 });
    } catch (err) {
      const e = err as Error & { stderr?: string; stdout?: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    }
  }
}

function userIds(name: string): { uid: number; gid: number } {
  const line = execFileSync('getent', ['passwd', name], { encoding: 'utf8' }).trim();
  const [, , uid, gid] = line.split(':');
  if (!uid || !gid) throw new Error(`no OS user ${name} to own the private Postgres cluster`);
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * A Temporal dev server on a fixed port with its state in a file: `kill()` is a SIGKILL (no
 * shutdown of its own), `restart()` starts it again on the same port and file.
 */
export class RestartableTemporal {
  kills = 0;
  private server: DevServer | undefined;

  private constructor(
    readonly port: number,
    readonly dbFile: string,
    private readonly namespace: string,
    private readonly logFile: string,
  ) {}

  static async start(opts: { dir: string; namespace: string }): Promise<RestartableTemporal> {
    await mkdir(opts.dir, { recursive: true });
    const t = new RestartableTemporal(await freePort(), path.join(opts.dir, 'temporal.sqlite'), opts.namespace, path.join(opts.dir, 'temporal.log'));
    await t.restart();
    return t;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get isRunning(): boolean {
    return this.server !== undefined;
  }

  async kill(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    this.kills++;
    await s.kill();
  }

  /** Start on the same port and state file; resolves once the frontend answers for the namespace. */
  async restart(): Promise<void> {
    if (this.server) return;
    for (let attempt = 1; ; attempt++) {
      try {
        this.server = await startTemporalDevServer({ port: this.port, dbFile: this.dbFile, namespace: this.namespace, logFile: this.logFile, readyTimeoutMs: 120_000 });
        return;
      } catch (err) {
        // The dev server binds more ports than its frontend's, picked afresh at each start; one
        // taken meanwhile by another process ends the start ("can't set frontend port …: address
        // already in use", a restart in the 2,000-call run). Started again, it picks others.
        if (attempt >= 3 || !/address already in use/i.test((err as Error).message)) throw err;
      }
    }
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    await s?.stop();
  }
}
