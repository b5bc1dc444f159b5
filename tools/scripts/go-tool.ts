/**
 * Test servers built from source with `go install` through the Go module proxy (the only registry
 * besides npm and Debian's that this machine reaches) and cached in ~/.cache/lenstack, pinned by
 * version: Stripe's stripe-mock, the versitygw S3 gateway and Prometheus's promtool. The temporal CLI has its own script
 * (tools/scripts/temporal-cli.ts) because it first looks for a `temporal` on PATH.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, constants, mkdir, rename, rm } from 'node:fs/promises';
import { homedir, setPriority } from 'node:os';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';

export interface GoTool {
  /** The binary's name, and the cache folder's prefix. */
  name: string;
  /** What `go install` builds, without the version. */
  pkg: string;
  version: string;
  /**
   * The module's go.mod has `replace` directives, which `go install pkg@version` refuses: build
   * it as a dependency of a scratch module instead (`go get`, `go build`), where they do not apply.
   */
  scratchModule?: boolean;
}

export function goToolPath(tool: GoTool, env: NodeJS.ProcessEnv = process.env): string {
  const cacheHome = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(cacheHome, 'lenstack', `${tool.name}-${tool.version}`, tool.name);
}

async function findGo(env: NodeJS.ProcessEnv, tool: GoTool): Promise<string> {
  for (const dir of [...(env.PATH ?? '').split(':').filter(Boolean), '/usr/local/go/bin']) {
    const candidate = join(dir, 'go');
    if (await access(candidate, constants.X_OK).then(() => true, () => false)) return candidate;
  }
  throw new Error(`${tool.name} is not built and there is no Go toolchain to build it (install Go, or set PATH)`);
}

export interface GoBuildOptions {
  /**
   * Niceness of the build (0 to 19): a build running beside tests that do not need it takes the
   * CPU they leave idle, not theirs. Go's compilers and linker are its children and inherit it.
   */
  nice?: number;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string, nice = 0): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    // Before go starts its compilers (it resolves modules first): they inherit the niceness.
    if (nice > 0 && child.pid !== undefined) {
      try {
        setPriority(child.pid, nice);
      } catch {
        // Not allowed here: the build runs at normal priority.
      }
    }
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** Whether the pinned tool is in the cache already. */
export function goToolBuilt(tool: GoTool, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  return access(goToolPath(tool, env), constants.X_OK).then(() => true, () => false);
}

/**
 * Runs `build` holding the cache folder's build lock, so two checkouts' test runs (or CI and a
 * person) that both find a tool missing build it once: the second waits, then finds it built.
 * A holder that died leaves a lock that goes stale after a minute (the holder refreshes it).
 */
export async function withBuildLock<T>(dir: string, build: () => Promise<T>, log?: (line: string) => void): Promise<T> {
  await mkdir(dir, { recursive: true });
  let said = false;
  for (;;) {
    try {
      const release = await lockfile.lock(dir, { lockfilePath: `${dir}.build-lock`, stale: 60_000, update: 10_000, realpath: false });
      try {
        return await build();
      } finally {
        await release().catch(() => {});
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ELOCKED') throw err;
      if (!said) log?.(`another process is building into ${dir}; waiting for it`);
      said = true;
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
  }
}

/** The path of the pinned tool, built into the cache when missing. */
export async function ensureGoTool(tool: GoTool, env: NodeJS.ProcessEnv = process.env, opts: GoBuildOptions = {}): Promise<string> {
  const target = goToolPath(tool, env);
  if (await goToolBuilt(tool, env)) return target;
  const dir = join(target, '..');
  return withBuildLock(dir, async () => {
    // Built by the process we waited for.
    if (await goToolBuilt(tool, env)) return target;
    return buildGoTool(tool, env, target, dir, opts.nice ?? 0);
  }, (line) => process.stderr.write(`[go-tool] ${line}\n`));
}

/**
 * Compiler flags for the tools we build: no DWARF debug information, which nobody reads in a test
 * tool and the linker strips anyway (-s, -w). The compiler then does about a tenth less work:
 * versitygw 110 → 98 CPU-seconds (user) on this machine. docs/decisions.md, "Test run time".
 */
export const GO_BUILD_FLAGS = ['-gcflags=all=-dwarf=false'];

async function buildGoTool(tool: GoTool, env: NodeJS.ProcessEnv, target: string, dir: string, nice: number): Promise<string> {
  const go = await findGo(env, tool);
  // Into a private directory, then renamed: concurrent builds never see half a binary.
  const gobin = join(dir, `.build-${process.pid}-${randomBytes(4).toString('hex')}`);
  const goEnv = { ...env, GOBIN: gobin, GOFLAGS: ['-buildvcs=false', '-ldflags=-s', ...GO_BUILD_FLAGS].join(' ') };
  try {
    if (tool.scratchModule) {
      await mkdir(gobin, { recursive: true });
      const steps: string[][] = [['mod', 'init', 'lenstack-build'], ['get', `${tool.pkg}@v${tool.version}`], ['build', '-o', join(gobin, tool.name), tool.pkg]];
      for (const args of steps) {
        const { code, output } = await run(go, args, goEnv, gobin, nice);
        if (code !== 0) throw new Error(`go ${args.join(' ')} failed (${code}): ${output.slice(-1000)}`);
      }
    } else {
      const { code, output } = await run(go, ['install', `${tool.pkg}@v${tool.version}`], goEnv, undefined, nice);
      if (code !== 0) throw new Error(`go install ${tool.pkg} failed (${code}): ${output.slice(-1000)}`);
    }
    await rename(join(gobin, tool.name), target);
  } finally {
    await rm(gobin, { recursive: true, force: true });
  }
  return target;
}
