/**
 * `npm run client:pack [-- --out <dir>]`: @lenstack/client (and @lenstack/cli, the `lenstack` command
 * on top of it) as installable npm tarballs — the
 * TypeScript sources compiled to ESM JavaScript with type declarations (Node ≥ 20; no Node-only
 * import, so bundlers and browsers take it too), its own package.json, README and CHANGELOG. In
 * this repository the workspace keeps importing the sources directly (no build step to forget);
 * the tarball is what a developer outside it installs. Publishing it is the operator's step.
 * Prints the tarballs' paths.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { isMain } from './is-main.ts';

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLIENT = join(ROOT, 'clients/typescript');
const CLI = join(ROOT, 'clients/cli');

/**
 * TypeScript 5.9's tsc (the repository's typecheck uses 7, which does not emit yet): the sources
 * import each other as `.ts`, rewritten to `.js` in the output.
 */
async function compile(entry: string, rootDir: string, outDir: string, extra: string[] = []): Promise<void> {
  await run(process.execPath, [
    join(ROOT, 'node_modules/typescript/bin/tsc'), entry,
    '--outDir', outDir, '--rootDir', rootDir, '--declaration',
    '--target', 'es2022', '--lib', 'es2022,dom,dom.iterable',
    '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--rewriteRelativeImportExtensions', '--strict', '--skipLibCheck', ...extra,
  ], { cwd: ROOT }).catch((err: { stdout?: string }) => {
    throw new Error(`tsc could not compile ${entry}:\n${err.stdout ?? String(err)}`);
  });
}

async function pack(stage: string, outDir: string): Promise<string> {
  await mkdir(outDir, { recursive: true });
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', resolve(outDir)], { cwd: stage });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string }>;
  return join(resolve(outDir), packed!.filename);
}

/** The API document's version: the client and the CLI are versioned with it (CHANGELOG.md). */
async function documentVersion(): Promise<string> {
  return (JSON.parse(await readFile(join(ROOT, 'openapi/lenstack.json'), 'utf8')) as { info: { version: string } }).info.version;
}

/**
 * `@lenstack/cli`: the `lenstack` command, compiled, depending on @lenstack/client of the same
 * version (install both tarballs; published, npm resolves it). Returns the tarball's path.
 */
export async function packCli(outDir: string): Promise<string> {
  const root = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const version = await documentVersion();
  const stage = await mkdtemp(join(tmpdir(), 'lenstack-cli-pack-'));
  try {
    // The CLI's sources import the client by its package name: compiled against the client's
    // sources, resolved at run time to the installed @lenstack/client.
    await compile(join(CLI, 'src/main.ts'), join(CLI, 'src'), join(stage, 'dist'));
    await mkdir(join(stage, 'bin'));
    await writeFile(
      join(stage, 'bin/lenstack.js'),
      "#!/usr/bin/env node\nimport { cliEnv, main } from '../dist/main.js';\n\nprocess.exitCode = await main(process.argv.slice(2), cliEnv(process.env), { stdout: process.stdout, stderr: process.stderr });\n",
      { mode: 0o755 },
    );
    const deps = Object.fromEntries(['csv-parse', 'leven', 'tus-js-client'].map((d) => [d, root.dependencies[d]!]));
    const pkg = {
      name: '@lenstack/cli',
      version,
      description: 'lenstack: photo analysis from the command line (analyze, lookup, enrich, fleet batches with resumable uploads).',
      license: 'UNLICENSED',
      type: 'module',
      bin: { lenstack: './bin/lenstack.js' },
      files: ['bin', 'dist'],
      engines: { node: '>=20' },
      dependencies: { '@lenstack/client': version, ...deps },
    };
    await writeFile(join(stage, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
    return await pack(stage, outDir);
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

/** Builds the client's tarball into `outDir`; returns its path. */
export async function packClient(outDir: string): Promise<string> {
  const source = JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8')) as { name: string; description: string; dependencies: Record<string, string> };
  const stage = await mkdtemp(join(tmpdir(), 'lenstack-client-pack-'));
  try {
    await compile(join(CLIENT, 'src/index.ts'), join(CLIENT, 'src'), join(stage, 'dist'));
    const pkg = {
      name: source.name,
      version: await documentVersion(),
      description: source.description,
      // No licence has been chosen for Lenstack: the operator sets it before publishing.
      license: 'UNLICENSED',
      type: 'module',
      exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
      types: './dist/index.d.ts',
      files: ['dist', 'README.md', 'CHANGELOG.md'],
      engines: { node: '>=20' },
      sideEffects: false,
      dependencies: source.dependencies,
    };
    await writeFile(join(stage, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
    for (const f of ['README.md', 'CHANGELOG.md']) await copyFile(join(CLIENT, f), join(stage, f));
    return await pack(stage, outDir);
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string', default: '.data/pack' } } });
  console.log(await packClient(resolve(ROOT, values.out)));
  console.log(await packCli(resolve(ROOT, values.out)));
}
