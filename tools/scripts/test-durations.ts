/**
 * `npm run test:durations`: writes test/harness/durations.json, how long each test file took, from
 * vitest's cache of its last runs (node_modules/.vite/vitest/<project>/results.json). The sequencer
 * reads it on a clone that has no cache, to start the longest files first (test/harness/durations.ts).
 * Run it after a whole `npm test` when files were added or grew much longer, and commit the result.
 */
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { committedDurations, DURATIONS_FILE } from '../../test/harness/durations.ts';
import { isMain } from './is-main.ts';

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const CACHE = join(REPO_ROOT, 'node_modules', '.vite', 'vitest');

interface CachedResults {
  projects?: Record<string, { files?: Record<string, { duration?: number }> }>;
}

/** Every test file under test/ (relative paths), sorted. */
async function testFiles(): Promise<string[]> {
  const entries = await readdir(join(REPO_ROOT, 'test'), { recursive: true });
  return entries
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => join('test', f))
    .sort();
}

/**
 * Seconds (one decimal) for each existing test file: vitest's figure when its newest cache has one,
 * else the committed one (a cache of a few files' runs keeps the others' estimates); files that
 * are gone are dropped.
 */
async function durationsFromCache(committed: Map<string, number>): Promise<{ durations: Record<string, number>; missing: string[]; cached: number }> {
  const dirs = await readdir(CACHE).catch(() => [] as string[]);
  const caches = await Promise.all(
    dirs.map(async (d) => {
      const file = join(CACHE, d, 'results.json');
      const info = await stat(file).catch(() => null);
      return info ? { file, mtime: info.mtimeMs } : null;
    }),
  );
  const newest = caches.filter((c) => c !== null).sort((a, b) => b.mtime - a.mtime)[0];
  const cached: CachedResults = newest ? JSON.parse(await readFile(newest.file, 'utf8')) : {};
  const known = new Map<string, number>();
  for (const project of Object.values(cached.projects ?? {})) {
    for (const [file, result] of Object.entries(project.files ?? {})) if (typeof result.duration === 'number') known.set(file, result.duration);
  }
  const durations: Record<string, number> = {};
  const missing: string[] = [];
  for (const file of await testFiles()) {
    const ms = known.get(file);
    const kept = committed.get(file);
    if (ms !== undefined) durations[file] = Math.round(ms / 100) / 10;
    else if (kept !== undefined) durations[file] = kept;
    else missing.push(file);
  }
  return { durations, missing, cached: known.size };
}

async function main(): Promise<number> {
  const { durations, missing, cached } = await durationsFromCache(await committedDurations());
  const count = Object.keys(durations).length;
  if (cached === 0) {
    console.error('vitest has no results cached here: run `npm test` first, then this again');
    return 1;
  }
  const target = fileURLToPath(DURATIONS_FILE);
  await writeFile(target, `${JSON.stringify(durations, null, 2)}\n`);
  console.log(`wrote ${relative(REPO_ROOT, target)}: ${count} files`);
  if (missing.length > 0) console.log(`no duration yet for ${missing.length} (they run first, in vitest's order): ${missing.join(', ')}`);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = await main();
