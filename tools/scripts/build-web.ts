import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Builds the console's front end (web/ui → web/ui/dist) with Vite when the build is missing or
 * older than any source file: `npm start` and the test setup call it, so no one has to remember
 * a build step. Returns whether it built.
 */
const UI = fileURLToPath(new URL('../../web/ui', import.meta.url));
const DIST_INDEX = path.join(UI, 'dist', 'index.html');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'dist' || entry.name === 'node_modules') continue;
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(p) : statSync(p).mtimeMs);
  }
  return newest;
}

export async function ensureConsoleBuilt(opts: { force?: boolean } = {}): Promise<boolean> {
  let builtAt = 0;
  try {
    builtAt = statSync(DIST_INDEX).mtimeMs;
  } catch {
    builtAt = 0;
  }
  if (!opts.force && builtAt > newestSource(UI)) return false;
  const { build } = await import('vite');
  // Vite lets NODE_ENV pick React's build and JSX transform: inside the tests it is `test`, which
  // would ship the development React. The console is always built for production.
  const nodeEnv = process.env.NODE_ENV;
  process.env.NODE_ENV = 'production';
  try {
    await build({ configFile: path.join(UI, 'vite.config.ts'), mode: 'production', logLevel: 'warn' });
  } finally {
    if (nodeEnv === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = nodeEnv;
  }
  return true;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const t0 = performance.now();
  const built = await ensureConsoleBuilt({ force: process.argv.includes('--force') });
  console.log(built ? `console built into web/ui/dist in ${((performance.now() - t0) / 1000).toFixed(1)} s` : 'console build is up to date');
}
