/**
 * The workflow code bundled once and kept on disk, for the test harness: webpack takes seconds of
 * CPU, and every test file that starts a worker would otherwise bundle the same code again in its
 * own process. The bundle is the one `worker/main.ts` builds (`bundleWorkflowCode` on
 * workflows/index.ts, no other option), cached under a hash of everything it is built from:
 *
 * - every file workflows/index.ts reaches through relative imports (workflows/, and what they take
 *   from core/ and credits/; tools/scripts/import-graph.ts);
 * - the installed npm packages (node_modules/.package-lock.json, or package-lock.json): the
 *   Temporal SDK, webpack and swc that bundle it, and any package the workflow code imports.
 *
 * A changed source or package gives a new key, so a stale bundle is never used.
 *
 *   npx tsx tools/scripts/workflow-bundle.ts    # prints the bundle's path, building it if needed
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ImportGraph } from './import-graph.ts';
import { isMain } from './is-main.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Same file as worker/main.ts's WORKFLOWS_PATH (not imported: that module loads the whole worker). */
export const WORKFLOWS_ENTRY = join(ROOT, 'workflows/index.ts');
export const WORKFLOW_BUNDLE_CACHE = join(ROOT, 'node_modules/.cache/lenstack/workflow-bundles');
/** Bundles kept besides the newest; older ones are deleted when a new one is written. */
const KEEP = 8;
/** Changes when what this module passes to the bundler changes. */
const FORMAT = 'bundleWorkflowCode(workflowsPath) v1';

/** The files the bundle of `entry` is built from: `entry` and what it reaches through relative imports. */
export function workflowSources(entry: string = WORKFLOWS_ENTRY): Promise<string[]> {
  return new ImportGraph().reachable(entry);
}

/** The cache key of the bundle of `entry`: its sources (paths and contents) and the installed packages. */
export async function workflowBundleKey(entry: string = WORKFLOWS_ENTRY, root: string = ROOT): Promise<string> {
  const hash = createHash('sha256').update(FORMAT);
  for (const file of await workflowSources(entry)) hash.update(`\0${relative(root, file)}\0`).update(await readFile(file));
  const lock =
    (await readFile(join(root, 'node_modules/.package-lock.json')).catch(() => null)) ??
    (await readFile(join(root, 'package-lock.json')).catch(() => null));
  hash.update('\0packages\0').update(lock ?? 'no lockfile');
  return hash.digest('hex').slice(0, 32);
}

/**
 * The path of the bundled workflow code, from the cache or bundled now. Two runs bundling the same
 * key at once each write a private file and rename it into place: either result is the same code.
 * A source edited while webpack ran changes the key: that bundle is not kept, and it bundles again.
 */
export async function ensureWorkflowBundle(opts: { cacheDir?: string; log?: (line: string) => void } = {}): Promise<{ path: string; built: boolean }> {
  const cacheDir = opts.cacheDir ?? WORKFLOW_BUNDLE_CACHE;
  for (let attempt = 1; ; attempt++) {
    const key = await workflowBundleKey();
    const path = join(cacheDir, `${key}.js`);
    if (await stat(path).then((s) => s.isFile(), () => false)) return { path, built: false };
    // Loaded only when bundling: the worker package is heavy to import.
    const { bundleWorkflowCode } = await import('@temporalio/worker');
    const t0 = Date.now();
    const quiet = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} };
    const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_ENTRY, logger: quiet as never });
    if ((await workflowBundleKey()) !== key && attempt < 3) continue;
    await mkdir(cacheDir, { recursive: true });
    const partial = `${path}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
    await writeFile(partial, code);
    await rename(partial, path);
    opts.log?.(`bundled the workflow code in ${((Date.now() - t0) / 1000).toFixed(1)} s (cached in ${path})`);
    await prune(cacheDir, path);
    return { path, built: true };
  }
}

/** Deletes all but the newest bundles (never `keep`, the one just written). */
async function prune(cacheDir: string, keep: string): Promise<void> {
  const entries = await Promise.all(
    (await readdir(cacheDir))
      .filter((f) => f.endsWith('.js'))
      .map(async (f) => ({ path: join(cacheDir, f), mtime: (await stat(join(cacheDir, f)).catch(() => null))?.mtimeMs ?? 0 })),
  );
  const old = entries.filter((e) => e.path !== keep).sort((a, b) => b.mtime - a.mtime).slice(KEEP);
  await Promise.all(old.map((e) => rm(e.path, { force: true })));
}

if (isMain(import.meta.url)) {
  console.log((await ensureWorkflowBundle({ log: (line) => process.stderr.write(`[workflow-bundle] ${line}\n`) })).path);
}
