/**
 * Breaking changes of the public API contract, by oasdiff (github.com/oasdiff/oasdiff): built
 * from source with `go install` through the Go module proxy and cached in ~/.cache/lenstack, like
 * the temporal CLI and stripe-mock.
 *
 * openapi/baseline.json is the last reviewed contract; openapi/lenstack.json is what the code
 * describes now. Every ERR-level change between them fails, unless openapi/breaking-ignore.txt
 * lists it with the reason it was accepted.
 *
 *   npm run openapi:breaking                      # exits 1 on an unreviewed breaking change
 *   npx tsx tools/scripts/oasdiff.ts --path       # prints the binary's path, building it if needed
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ensureGoTool, goToolPath, type GoTool } from './go-tool.ts';
import { isMain } from './is-main.ts';
import { OPENAPI_FILES, REPO_ROOT } from './openapi.ts';

export const OASDIFF_VERSION = '1.37.0';
export const OASDIFF: GoTool = { name: 'oasdiff', pkg: 'github.com/oasdiff/oasdiff', version: OASDIFF_VERSION };

export const BASELINE_FILE = 'openapi/baseline.json';
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

if (isMain(import.meta.url)) {
  if (process.argv.includes('--path')) {
    console.log(await ensureOasdiff());
  } else {
    const result = await breakingChanges(join(REPO_ROOT, BASELINE_FILE), join(REPO_ROOT, OPENAPI_FILES.public), { ignoreFile: join(REPO_ROOT, IGNORE_FILE) });
    process.stdout.write(result.output);
    if (result.code === 0) console.log(`no unreviewed breaking change of ${OPENAPI_FILES.public} against ${BASELINE_FILE}`);
    else console.error(`\n${OPENAPI_FILES.public} breaks the contract in ${BASELINE_FILE}: fix it, or review the change and list it with its reason in ${IGNORE_FILE}`);
    process.exitCode = result.code;
  }
}
