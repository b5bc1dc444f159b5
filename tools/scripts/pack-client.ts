/**
 * `npm run client:pack [-- --out <dir>]`: @lenstack/client as an installable npm tarball — the
 * TypeScript sources compiled to ESM JavaScript with type declarations (Node ≥ 20; no Node-only
 * import, so bundlers and browsers take it too), its own package.json, README and CHANGELOG. In
 * this repository the workspace keeps importing the sources directly (no build step to forget);
 * the tarball is what a developer outside it installs. Publishing it is the operator's step.
 * Prints the tarball's path.
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

/** Builds the tarball into `outDir`; returns its path. */
export async function packClient(outDir: string): Promise<string> {
  const source = JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8')) as { name: string; description: string; dependencies: Record<string, string> };
  // Versioned with the API document it is generated from (CHANGELOG.md).
  const document = JSON.parse(await readFile(join(ROOT, 'openapi/lenstack.json'), 'utf8')) as { info: { version: string } };
  const stage = await mkdtemp(join(tmpdir(), 'lenstack-client-pack-'));
  try {
    // TypeScript 5.9's tsc (the repository's typecheck uses 7, which does not emit yet): the
    // sources import each other as `.ts`, rewritten to `.js` in the output.
    await run(process.execPath, [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      join(CLIENT, 'src/index.ts'),
      '--outDir', join(stage, 'dist'),
      '--rootDir', join(CLIENT, 'src'),
      '--declaration',
      '--target', 'es2022',
      '--lib', 'es2022,dom,dom.iterable',
      '--module', 'nodenext',
      '--moduleResolution', 'nodenext',
      '--rewriteRelativeImportExtensions',
      '--strict',
      '--skipLibCheck',
    ], { cwd: ROOT }).catch((err: { stdout?: string }) => {
      throw new Error(`tsc could not compile the client:\n${err.stdout ?? String(err)}`);
    });
    const pkg = {
      name: source.name,
      version: document.info.version,
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
    await mkdir(outDir, { recursive: true });
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', resolve(outDir)], { cwd: stage });
    const [packed] = JSON.parse(stdout) as Array<{ filename: string }>;
    return join(resolve(outDir), packed!.filename);
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string', default: '.data/pack' } } });
  console.log(await packClient(resolve(ROOT, values.out)));
}
