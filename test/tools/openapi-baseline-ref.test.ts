import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenApiDocument } from '../../api/openapi.ts';
import { BASELINE_REF_FILE, checkContract, ensureOasdiff, IGNORE_FILE } from '../../tools/scripts/oasdiff.ts';
import { OPENAPI_FILES, REPO_ROOT } from '../../tools/scripts/openapi.ts';

/**
 * The breaking-change baseline comes from git (issue 23 §5.4, docs/decisions.md "The OpenAPI
 * documents"). Before: openapi/baseline.json in the working tree was the baseline, so a change that
 * removed an operation could copy the new document over it and pass. Now the baseline is a
 * document at a commit of this history, named in openapi/baseline.ref: editing any file's content
 * cannot move it, only a visible change of that one line can.
 */

const run = promisify(execFile);
const git = (cwd: string, ...args: string[]) => run('git', ['-c', 'user.name=test', '-c', 'user.email=test@example.test', ...args], { cwd });

let repo: string;
let current: OpenApiDocument;
let released: string;
beforeAll(async () => {
  await ensureOasdiff();
  current = JSON.parse(await readFile(join(REPO_ROOT, OPENAPI_FILES.public), 'utf8')) as OpenApiDocument;
  // A repository of its own: a released contract at one commit, the ref naming it in the next.
  repo = await mkdtemp(join(tmpdir(), 'lenstack-baseline-ref-'));
  await git(repo, 'init', '-q', '-b', 'main');
  await mkdir(join(repo, 'openapi'));
  await writeFile(join(repo, OPENAPI_FILES.public), JSON.stringify(current, null, 2));
  await writeFile(join(repo, IGNORE_FILE), '# nothing reviewed\n');
  await git(repo, 'add', '-A');
  await git(repo, 'commit', '-q', '-m', 'release');
  released = (await git(repo, 'rev-parse', 'HEAD')).stdout.trim();
  await writeFile(join(repo, BASELINE_REF_FILE), `# the released contract\n${released}:${OPENAPI_FILES.public}\n`);
  await git(repo, 'add', '-A');
  await git(repo, 'commit', '-q', '-m', 'baseline ref');
}, 15 * 60_000);
afterAll(async () => {
  if (repo) await rm(repo, { recursive: true, force: true });
});

const withoutAnalyze = () => {
  const doc = structuredClone(current);
  delete doc.paths['/v1/analyze'];
  return JSON.stringify(doc, null, 2);
};

describe('the breaking-change baseline is a committed document named by openapi/baseline.ref', () => {
  it('passes the unchanged document, naming the commit it compared against', async () => {
    const result = await checkContract(repo);
    expect(result.code, result.output).toBe(0);
    expect(result.baseline).toBe(`${released}:${OPENAPI_FILES.public}`);
  });

  it('an operation removed and a "baseline" file written to match is still caught', async () => {
    // The attack on a baseline kept as a file: replace it with the new document in the same change.
    await writeFile(join(repo, OPENAPI_FILES.public), withoutAnalyze());
    await writeFile(join(repo, 'openapi/baseline.json'), withoutAnalyze());
    await git(repo, 'commit', '-q', '-am', 'drop analyze');
    await git(repo, 'add', '-A');
    await git(repo, 'commit', '-q', '-m', 'and its baseline');
    const result = await checkContract(repo);
    expect(result.code).toBe(1);
    expect(result.output).toMatch(/api-path-removed-without-deprecation[^\n]*\n\s*in API POST \/v1\/analyze/);
    await git(repo, 'reset', '-q', '--hard', 'HEAD~2');
  });

  it('refuses a ref that names no release: a branch, HEAD, a commit outside this history, a missing commit', async () => {
    const refTo = (line: string) => writeFile(join(repo, BASELINE_REF_FILE), `${line}\n`);
    await refTo(`HEAD:${OPENAPI_FILES.public}`);
    await expect(checkContract(repo)).rejects.toThrow(/a full commit hash or a v\* release tag/);
    await refTo(`main:${OPENAPI_FILES.public}`);
    await expect(checkContract(repo)).rejects.toThrow(/a full commit hash or a v\* release tag/);

    // A commit made on a side branch with the broken document: not a contract this history released.
    await git(repo, 'checkout', '-q', '-b', 'side');
    await writeFile(join(repo, OPENAPI_FILES.public), withoutAnalyze());
    await git(repo, 'commit', '-q', '-am', 'side');
    const side = (await git(repo, 'rev-parse', 'HEAD')).stdout.trim();
    await git(repo, 'checkout', '-q', 'main');
    await refTo(`${side}:${OPENAPI_FILES.public}`);
    await expect(checkContract(repo)).rejects.toThrow(/not an ancestor of HEAD/);

    await refTo(`${'0'.repeat(40)}:${OPENAPI_FILES.public}`);
    await expect(checkContract(repo)).rejects.toThrow(/not in this clone/);
    await refTo(`${released}:openapi/missing.json`);
    await expect(checkContract(repo)).rejects.toThrow(/openapi\/missing.json/);
    await git(repo, 'checkout', '-q', '--', BASELINE_REF_FILE);
  });

  it('a v* tag names a release too', async () => {
    await git(repo, 'tag', '-a', 'v1.1.0', '-m', 'v1.1.0', released);
    await writeFile(join(repo, BASELINE_REF_FILE), `v1.1.0:${OPENAPI_FILES.public}\n`);
    const result = await checkContract(repo);
    expect(result.code, result.output).toBe(0);
    expect(result.baseline).toBe(`${released}:${OPENAPI_FILES.public}`);
    await git(repo, 'checkout', '-q', '--', BASELINE_REF_FILE);
  });

  it('this repository: the recorded baseline is reachable and the committed document passes against it', async () => {
    const ref = (await readFile(join(REPO_ROOT, BASELINE_REF_FILE), 'utf8')).split('\n').filter((l) => l && !l.startsWith('#'));
    expect(ref).toHaveLength(1);
    const result = await checkContract(REPO_ROOT);
    expect(result.code, result.output).toBe(0);
    expect(result.baseline).toBe(ref[0]);
  });
});
