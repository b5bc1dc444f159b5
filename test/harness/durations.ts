/**
 * How long each test file took in a whole run, committed as test/harness/durations.json, so that a
 * first run on a fresh clone (which has no vitest cache) starts its longest files first, as vitest
 * does from its cache on any later run: three workers then end together instead of one running a
 * two-minute file alone at the end. Only the order depends on it; a stale or missing entry costs
 * time, never a test. `npm run test:durations` writes it again from the last whole run
 * (tools/scripts/test-durations.ts). docs/decisions.md, "Test run time".
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

export const DURATIONS_FILE = new URL('./durations.json', import.meta.url);

/** Seconds by test file path relative to the repository root (`test/...`); empty when the file is missing. */
export async function committedDurations(): Promise<Map<string, number>> {
  const text = await readFile(DURATIONS_FILE, 'utf8').catch(() => null);
  if (text === null) return new Map();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    // A merge left it broken, say: the run goes on in vitest's own order.
    process.stderr.write(`[harness] ${fileURLToPath(DURATIONS_FILE)} is not JSON (${err instanceof Error ? err.message : String(err)}); \`npm run test:durations\` writes it again\n`);
    return new Map();
  }
  if (typeof parsed !== 'object' || parsed === null) return new Map();
  return new Map(Object.entries(parsed).filter((entry): entry is [string, number] => typeof entry[1] === 'number' && Number.isFinite(entry[1])));
}

export interface Estimate {
  /** The last run failed this file (vitest's cache): it goes first, as vitest puts it. */
  failed?: boolean;
  /** Expected seconds: vitest's cached duration, else the committed one. */
  seconds?: number;
}

/**
 * `files` in vitest's order, re-sorted: failed first, then files with no estimate at all (new
 * files, in vitest's order), then longest first. The sort is stable: ties keep vitest's order.
 */
export function longestFirst<T>(files: T[], estimate: (file: T) => Estimate): T[] {
  const rank = (e: Estimate) => (e.failed ? 0 : e.seconds === undefined ? 1 : 2);
  return files
    .map((file) => ({ file, e: estimate(file) }))
    .sort((a, b) => rank(a.e) - rank(b.e) || (b.e.seconds ?? 0) - (a.e.seconds ?? 0))
    .map(({ file }) => file);
}
