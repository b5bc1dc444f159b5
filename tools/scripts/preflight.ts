/**
 * What a machine needs before `npm test` (or `npm start`) can do its work, checked at once and
 * reported together with the command that installs each thing, before anything is built: a
 * newcomer learns in seconds what is missing, not after twenty minutes of builds from the first
 * failing test. `.ci/run` installs all of it on Debian; docs/deployment.md lists it.
 */
import { execFile } from 'node:child_process';
import { access, readdir, readFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { probe } from '../../images/heic-native.ts';
import { goToolBuilt, type GoTool } from './go-tool.ts';
import { PROMTOOL, systemPromtool } from './promtool.ts';
import { temporalCliLocation } from './temporal-cli.ts';

export interface Missing {
  what: string;
  /** Why the product or its tests need it. */
  why: string;
  /** The command that installs it on Debian (our machines and CI), or what to do otherwise. */
  install: string;
}

export interface PreflightNeeds {
  /** The console's browser tests run Chromium (CHROMIUM_PATH, else /usr/bin/chromium). */
  browser: boolean;
  /** Go-built tools the run will use; Go is needed only for those not built yet. */
  goTools: GoTool[];
  /** The Temporal CLI (its dev server) unless TEMPORAL_ADDRESS names a running Temporal. */
  temporal: boolean;
  /** Programs the tests run as children (curl, script). */
  testPrograms: boolean;
  /**
   * Where the native HEIC decoder is looked for, when the run needs it (the HEIC tests run on it):
   * built there already, or a C compiler and libheif's headers to build it.
   */
  heicDecoder?: string;
}

const runs = (file: string, args: string[], env: NodeJS.ProcessEnv) =>
  new Promise<boolean>((resolve) => execFile(file, args, { env, timeout: 10_000 }, (err) => resolve(!err)));

const executable = (path: string) => access(path, constants.X_OK).then(() => true, () => false);

/** `name` on PATH (absolute directories only), as the shell would find it. */
async function onPath(name: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  for (const dir of (env.PATH ?? '').split(delimiter)) if (dir && isAbsolute(dir) && (await executable(join(dir, name)))) return true;
  return false;
}

/** libheif's C header where Debian's libheif-dev (multiarch) or a source build puts it. */
async function heifHeadersPresent(): Promise<boolean> {
  const multiarch = await readdir('/usr/include').then((names) => names.filter((n) => n.endsWith('-linux-gnu')), () => []);
  for (const dir of ['/usr/include', '/usr/local/include', ...multiarch.map((n) => join('/usr/include', n))]) {
    if (await access(join(dir, 'libheif', 'heif.h')).then(() => true, () => false)) return true;
  }
  return false;
}

async function temporalCliPresent(env: NodeJS.ProcessEnv): Promise<boolean> {
  const where = temporalCliLocation(env);
  if (where.override) return executable(where.override);
  return (await executable(where.cachedPath)) || onPath('temporal', env);
}

export async function preflight(needs: PreflightNeeds, env: NodeJS.ProcessEnv = process.env, root = process.cwd()): Promise<Missing[]> {
  const missing: Missing[] = [];
  const wanted = (await readFile(join(root, '.nvmrc'), 'utf8')).trim();
  if (process.versions.node.split('.')[0] !== wanted.split('.')[0]) {
    missing.push({ what: `Node ${wanted} (this is ${process.version})`, why: 'the product and its tests run on the Node of .nvmrc', install: 'export PATH="$(bash tools/scripts/node.sh):$PATH"   # fetches the official build from the npm registry, cached' });
  }
  // exiftool-vendored runs exiftool, a Perl program, on Linux.
  if (!(await runs('perl', ['-v'], env))) missing.push({ what: 'perl', why: 'exiftool (enrichment, metadata) is a Perl program', install: 'apt-get install -y perl' });
  if (needs.browser) {
    const chromium = env.CHROMIUM_PATH ?? '/usr/bin/chromium';
    if (!(await executable(chromium))) missing.push({ what: `Chromium (${chromium})`, why: "the console's browser tests", install: 'apt-get install -y chromium   # or set CHROMIUM_PATH' });
  }
  if (needs.testPrograms) {
    if (!(await onPath('curl', env))) missing.push({ what: 'curl', why: "the README's first request is run as written", install: 'apt-get install -y curl' });
    if (!(await onPath('script', env))) missing.push({ what: 'script (util-linux)', why: "the CLI's terminal progress is tested on a real pty", install: 'apt-get install -y bsdutils' });
  }
  if (needs.heicDecoder && !('libheif' in (await probe(needs.heicDecoder)))) {
    const lacking = [(await onPath('cc', env)) ? '' : 'gcc', (await heifHeadersPresent()) ? '' : 'libheif-dev'].filter(Boolean);
    if (lacking.length) {
      missing.push({ what: lacking.join(' and '), why: 'to build the native HEIC decoder once (images/heif-decode.c); the HEIC tests run on it as well as on the WASM fallback', install: 'apt-get install -y gcc libheif-dev' });
    }
  }
  const toBuild: string[] = [];
  if (needs.temporal && !(await temporalCliPresent(env))) toBuild.push('the Temporal CLI');
  for (const tool of needs.goTools) {
    if (await goToolBuilt(tool, env)) continue;
    if (tool === PROMTOOL && (await systemPromtool(env))) continue;
    toBuild.push(tool.name);
  }
  if (toBuild.length && !(await runs('go', ['version'], env))) {
    missing.push({
      what: 'Go',
      why: `to build ${toBuild.join(', ')} once (cached in ~/.cache/lenstack)`,
      install: 'Go 1.21 or later from https://go.dev/dl into /usr/local/go (Debian bookworm\'s golang-go is too old), with the Go module proxy reachable; apt-get install -y prometheus spares the promtool build',
    });
  }
  return missing;
}

/** The report: one line per missing thing, then every install command in one place. */
export function formatMissing(missing: Missing[]): string {
  return [
    `This machine lacks ${missing.length} thing${missing.length === 1 ? '' : 's'} the run needs:`,
    ...missing.map((m) => `  - ${m.what}: ${m.why}`),
    'Install them with:',
    ...missing.map((m) => `  ${m.install}`),
    '(.ci/run installs all of it on Debian.)',
  ].join('\n');
}
