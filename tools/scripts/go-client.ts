/**
 * The generated half of the Go module (clients/go/lenstack.gen.go), made by oapi-codegen from the
 * committed public document, as a Go developer outside this project would make it. oapi-codegen is
 * built from source through the Go module proxy and cached (go-tool.ts; a minute or two cold).
 *
 *   npm run client:go             # writes clients/go/lenstack.gen.go
 *   npm run client:go -- --check  # exits 1 when the committed file differs from what it makes
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ensureGoTool, type GoTool } from './go-tool.ts';
import { isMain } from './is-main.ts';

export const OAPI_CODEGEN: GoTool = { name: 'oapi-codegen', pkg: 'github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen', version: '2.8.2' };

// Kept light (no import of the app): the test harness imports OAPI_CODEGEN.
const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PUBLIC_DOCUMENT = 'openapi/lenstack.json';
export const GO_CLIENT_DIR = join(REPO_ROOT, 'clients/go');
const GENERATED = 'lenstack.gen.go';

/** The generated Go source for `document` (a path), as oapi-codegen writes it with the module's settings. */
export async function generateGoClient(document = join(REPO_ROOT, PUBLIC_DOCUMENT)): Promise<string> {
  const codegen = await ensureGoTool(OAPI_CODEGEN);
  const scratch = await mkdtemp(join(tmpdir(), 'lenstack-go-client-'));
  try {
    await copyFile(join(GO_CLIENT_DIR, 'oapi-codegen.yaml'), join(scratch, 'oapi-codegen.yaml'));
    await promisify(execFile)(codegen, ['-config', 'oapi-codegen.yaml', document], { cwd: scratch, maxBuffer: 64 * 1024 * 1024 });
    return await readFile(join(scratch, GENERATED), 'utf8');
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Whether clients/go/lenstack.gen.go is what oapi-codegen makes from the committed document. */
export async function goClientCurrent(): Promise<boolean> {
  const committed = await readFile(join(GO_CLIENT_DIR, GENERATED), 'utf8').catch(() => null);
  return committed === (await generateGoClient());
}

if (isMain(import.meta.url)) {
  if (process.argv.includes('--check')) {
    if (await goClientCurrent()) console.log(`clients/go/${GENERATED} is current`);
    else {
      console.error(`clients/go/${GENERATED} differs from what oapi-codegen makes of ${PUBLIC_DOCUMENT}: run \`npm run client:go\` and commit the result`);
      process.exitCode = 1;
    }
  } else {
    await writeFile(join(GO_CLIENT_DIR, GENERATED), await generateGoClient());
    console.log(`wrote clients/go/${GENERATED}`);
  }
}
