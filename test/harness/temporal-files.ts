/**
 * Which test files need the run's Temporal server. On a fresh machine the temporal CLI is built
 * with Go before the dev server can start (minutes); the files that need no Temporal run meanwhile
 * and the others run last, each waiting for the server before it is imported (global-setup.ts,
 * sequencer.ts, wait-for-tools.ts; docs/decisions.md, "Test run time").
 *
 * A file needs Temporal when it, or a file it reaches through relative imports (import-graph.ts),
 * can reach a Temporal server or its CLI: a connection (`Connection.connect`,
 * `NativeConnection.connect`), a test environment, the CLI itself (`ensureTemporalCli`), or a
 * child process of ours that connects (a `worker/main`, `api/server`, `web/server`, `chaos/main` or
 * `scripts/start` it spawns). The harness's own files are left out: `env.ts` only names the address.
 * A lazy client (`Connection.lazy`, test/helpers/deps.ts) or the SDK's mock activity environment
 * opens nothing, and does not count. Erring on the side of "needs" only moves a file later.
 */
import { readFile } from 'node:fs/promises';
import { dirname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ImportGraph } from '../../tools/scripts/import-graph.ts';

const REACHES_TEMPORAL = /\b(?:Native)?Connection\.connect\(|\bTestWorkflowEnvironment\b|\bensureTemporalCli\(/;
const SPAWNS_A_CONNECTING_MAIN = /['"`][^'"`\s]*\b(?:worker\/main|chaos\/main|api\/server|web\/server|scripts\/start)(?:\.ts)?['"`]/;

const harnessDir = dirname(fileURLToPath(import.meta.url)) + sep;

/** The files among `testFiles` (absolute paths) that need Temporal. */
export async function temporalFilesOf(testFiles: string[], graph = new ImportGraph()): Promise<Set<string>> {
  const verdicts = new Map<string, Promise<boolean>>();
  const reaches = (file: string) => {
    let verdict = verdicts.get(file);
    if (!verdict) {
      verdict = readFile(file, 'utf8').then((text) => REACHES_TEMPORAL.test(text) || SPAWNS_A_CONNECTING_MAIN.test(text));
      verdicts.set(file, verdict);
    }
    return verdict;
  };
  const needing = new Set<string>();
  for (const testFile of testFiles) {
    for (const file of await graph.reachable(testFile)) {
      if (file.startsWith(harnessDir)) continue;
      if (await reaches(file)) {
        needing.add(testFile);
        break;
      }
    }
  }
  return needing;
}
