/**
 * Breaking changes of the public API contract, by oasdiff (github.com/oasdiff/oasdiff): built
 * from source with `go install` through the Go module proxy and cached in ~/.cache/lenstack, like
 * the temporal CLI and stripe-mock.
 *
 * The baseline is the last released contract, read from git: openapi/baseline.ref names it as
 * `<commit or v* tag>:<path>`, a commit of this history (docs/decisions.md "The OpenAPI
 * documents"). A file in the working tree could be replaced in the very change that breaks the
 * contract; a document at a recorded commit cannot, and moving the ref is a one-line change a
 * review sees. openapi/lenstack.json is what the code describes now. Every ERR-level change
 * between them fails, unless openapi/breaking-ignore.txt lists it with the reason it was accepted.
 *
 *   npm run openapi:breaking                      # exits 1 on an unreviewed breaking change
 *   npx tsx tools/scripts/oasdiff.ts --path       # prints the binary's path, building it if needed
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ensureGoTool, goToolPath, type GoTool } from './go-tool.ts';
import { isMain } from './is-main.ts';
import { OPENAPI_FILES, REPO_ROOT } from './openapi.ts';

export const OASDIFF_VERSION = '1.37.0';
export const OASDIFF: GoTool = { name: 'oasdiff', pkg: 'github.com/oasdiff/oasdiff', version: OASDIFF_VERSION };

/** Names the baseline: one line `<full commit hash or v* tag>:<path of the document in it>`; `#` lines are comments. */
export const BASELINE_REF_FILE = 'openapi/baseline.ref';
export const IGNORE_FILE = 'openapi/breaking-ignore.txt';

export const oasdiffPath = (env: NodeJS.ProcessEnv = process.env): string => goToolPath(OASDIFF, env);

/** The path of the pinned oasdiff, built into the cache when missing. */
export const ensureOasdiff = (env: NodeJS.ProcessEnv = process.env): Promise<string> => ensureGoTool(OASDIFF, env);

export interface BreakingResult {
  /** oasdiff's exit code: 0 = no unreviewed ERR-level change, 1 = at least one. */
  code: number;
  /** Its report, plain text. */
  output: string;
}

/** `oasdiff breaking --fail-on ERR` of `revision` against `base`, with the reviewed changes ignored. */
export async function breakingChanges(base: string, revision: string, opts: { ignoreFile?: string } = {}): Promise<BreakingResult> {
  const bin = await ensureOasdiff();
  const args = ['breaking', base, revision, '--fail-on', 'ERR', '--format', 'text', '--color', 'never', '--allow-external-refs=false'];
  if (opts.ignoreFile) args.push('--err-ignore', opts.ignoreFile, '--warn-ignore', opts.ignoreFile);
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

const run = promisify(execFile);

/** A full commit hash, or a release tag: a branch name or HEAD would move with the change under review. */
const RELEASE_REV = /^(?:[0-9a-f]{40}|v\d[\w.-]*)$/;

/**
 * The baseline document named by `root`'s openapi/baseline.ref, read with `git show` from a commit
 * that must be an ancestor of HEAD (a contract this history released, not a commit made to fit).
 * Throws, saying what to do, when the ref is malformed or the commit is not in the clone.
 */
export async function baselineDocument(root: string = REPO_ROOT): Promise<{ ref: string; text: string }> {
  const lines = (await readFile(join(root, BASELINE_REF_FILE), 'utf8')).split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const line = lines[0] ?? '';
  const colon = line.indexOf(':');
  const rev = colon > 0 ? line.slice(0, colon) : '';
  const path = colon > 0 ? line.slice(colon + 1) : '';
  if (lines.length !== 1 || !RELEASE_REV.test(rev) || !path) {
    throw new Error(`${BASELINE_REF_FILE} must hold one line <rev>:<path>, <rev> a full commit hash or a v* release tag (found ${JSON.stringify(lines.join(' | ').slice(0, 200))})`);
  }
  const git = (...args: string[]) => run('git', ['-C', root, ...args], { maxBuffer: 64 * 1024 * 1024 });
  const commit = await git('rev-parse', '--verify', '--quiet', `${rev}^{commit}`).then(
    (r) => r.stdout.trim(),
    () => {
      throw new Error(`${BASELINE_REF_FILE}: ${rev} is not in this clone (a shallow clone? run \`git fetch --unshallow --tags\`)`);
    },
  );
  await git('merge-base', '--is-ancestor', commit, 'HEAD').catch(() => {
    throw new Error(`${BASELINE_REF_FILE}: ${rev} is not an ancestor of HEAD: the baseline must be a contract this history released`);
  });
  const text = await git('show', `${commit}:${path}`).then(
    (r) => r.stdout,
    () => {
      throw new Error(`${BASELINE_REF_FILE}: ${commit} has no ${path}`);
    },
  );
  return { ref: `${commit}:${path}`, text };
}

/** The whole check as CI runs it: `root`'s committed document against its recorded baseline, reviewed breaks ignored. */
export async function checkContract(root: string = REPO_ROOT): Promise<BreakingResult & { baseline: string }> {
  const baseline = await baselineDocument(root);
  const dir = await mkdtemp(join(tmpdir(), 'lenstack-baseline-'));
  try {
    const file = join(dir, 'baseline.json');
    await writeFile(file, baseline.text);
    const result = await breakingChanges(file, join(root, OPENAPI_FILES.public), { ignoreFile: join(root, IGNORE_FILE) });
    return { ...result, baseline: baseline.ref };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  if (process.argv.includes('--path')) {
    console.log(await ensureOasdiff());
  } else {
    const result = await checkContract();
    process.stdout.write(result.output);
    if (result.code === 0) console.log(`no unreviewed breaking change of ${OPENAPI_FILES.public} against ${result.baseline} (${BASELINE_REF_FILE})`);
    else console.error(`\n${OPENAPI_FILES.public} breaks the contract released at ${result.baseline}: fix it, or review the change and list it with its reason in ${IGNORE_FILE}`);
    process.exitCode = result.code;
  }
}
