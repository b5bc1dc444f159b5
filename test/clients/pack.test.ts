import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packCli, packClient } from '../../tools/scripts/pack-client.ts';
import { createTestAccount } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * @lenstack/client as a developer outside this repository gets it: the tarball installed into an
 * empty project, typechecked there against its declarations, and its README example run with the
 * oldest Node it claims when this machine has it (Debian's node 20), against the API.
 */
const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let p: Pipeline;
let baseUrl: string;
let project: string;
beforeAll(async () => {
  p = await startPipeline();
  baseUrl = await p.app.listen({ port: 0, host: '127.0.0.1' });
  project = await mkdtemp(join(tmpdir(), 'lenstack-client-user-'));
}, 120_000);
afterAll(async () => {
  await p?.close();
  if (project) await rm(project, { recursive: true, force: true });
});

describe('the @lenstack/client and @lenstack/cli tarballs', () => {
  it('installs into an empty project, typechecks there, and runs the README example against the API', async () => {
    const tarball = await packClient(join(project, 'pack'));
    const document = JSON.parse(await readFile(join(ROOT, 'openapi/lenstack.json'), 'utf8')) as { info: { version: string } };
    expect(tarball).toMatch(new RegExp(`lenstack-client-${document.info.version.replace(/\./g, '\\.')}\\.tgz$`));
    const { stdout: listing } = await run('tar', ['-tzf', tarball]);
    expect(listing.split('\n')).toEqual(expect.arrayContaining(['package/dist/index.js', 'package/dist/index.d.ts', 'package/dist/generated/lenstack.d.ts', 'package/README.md', 'package/CHANGELOG.md']));
    // JavaScript and declarations, no TypeScript source a consumer's Node could not run.
    expect(listing.split('\n').filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);

    const app = join(project, 'app');
    await run('mkdir', ['-p', app]);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'someone-else', private: true, type: 'module' }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], { cwd: app });

    // The README's example, as a developer would paste it (a local photo instead of a URL).
    await writeFile(
      join(app, 'example.ts'),
      `import { readFileSync } from 'node:fs';
import { Lenstack, LenstackError, photoOutput, type LensName } from '@lenstack/client';

const lenstack = new Lenstack({ apiKey: process.env.LENSTACK_API_KEY!, baseUrl: process.env.LENSTACK_BASE_URL! });
const modules: LensName[] = ['dating', 'describe'];
try {
  const analysis = await lenstack.analyze({ imageBase64: readFileSync(process.argv[2]!).toString('base64'), modules });
  const { estimatedDate, title } = photoOutput(analysis);
  console.log(JSON.stringify({ title, year: estimatedDate?.year ?? null, credits: analysis.usage.creditsCharged }));
} catch (err) {
  if (err instanceof LenstackError) console.error(err.code, err.status, err.requestId);
  else throw err;
}
`,
    );
    // Its types, through the package's declarations and exports only.
    await writeFile(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false, types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')] }, files: ['example.ts'] }));
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', app]);
    // Then as JavaScript (what the types erase to), on Debian's node 20 when there is one.
    await writeFile(join(app, 'example.mjs'), (await readFile(join(app, 'example.ts'), 'utf8')).replace(', type LensName', '').replace(': LensName[]', '').replace(/!/g, ''));
    const node = existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;
    const { stdout: version } = await run(node, ['--version']);
    expect(Number(/^v(\d+)/.exec(version)![1])).toBeGreaterThanOrEqual(20);
    const user = await createTestAccount(p.db, { community: 10 });
    const { stdout } = await run(node, ['example.mjs', join(ROOT, 'test/fixtures/photos/Canon_40D.jpg')], { cwd: app, env: { PATH: process.env.PATH, LENSTACK_API_KEY: user.liveKey, LENSTACK_BASE_URL: baseUrl } });
    const printed = JSON.parse(stdout) as { title: string | null; year: number | null; credits: number };
    expect(printed.credits).toBe(2);
    expect(typeof printed.title).toBe('string');
  }, 300_000);
  it('installs the lenstack command with the client, and it runs on node 20 against the API', async () => {
    const [client, cli] = [await packClient(join(project, 'pack')), await packCli(join(project, 'pack'))];
    const document = JSON.parse(await readFile(join(ROOT, 'openapi/lenstack.json'), 'utf8')) as { info: { version: string } };
    const app = join(project, 'cli-user');
    await run('mkdir', ['-p', app]);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'fleet-scripts', private: true, type: 'module' }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', client, cli], { cwd: app });
    const node = existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;
    const lenstack = (args: string[], key = '') =>
      run(node, [join(app, 'node_modules/.bin/lenstack'), ...args], { cwd: app, env: { PATH: process.env.PATH, LENSTACK_API_KEY: key, LENSTACK_BASE_URL: baseUrl } }).then(
        (r) => ({ code: 0, ...r }),
        (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
      );
    expect((await lenstack(['--version'])).stdout.trim()).toBe(document.info.version);
    const user = await createTestAccount(p.db, { community: 7 });
    const usage = await lenstack(['usage', '--json'], user.liveKey);
    expect(usage.code, usage.stderr).toBe(0);
    expect(JSON.parse(usage.stdout)).toMatchObject({ community: { balance: 7 } });
    const typo = await lenstack(['analyze', 'photo.jpg', '--lens', 'datng'], user.liveKey);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('did you mean "dating"?');
  }, 300_000);
});
