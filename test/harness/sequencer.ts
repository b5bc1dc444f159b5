import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { ImportGraph } from '../../tools/scripts/import-graph.ts';
import { temporalCliAtHand } from '../../tools/scripts/temporal-cli.ts';
import { toolsOf } from './go-tools.ts';
import { temporalFilesOf } from './temporal-files.ts';
import { waitingLast, type ToolState } from './waiting-last.ts';

/** Temporal as the sequencer sees it: ready when its CLI needs no build (global-setup.ts). */
const TEMPORAL: ToolState = { name: 'temporal', ready: async () => (await temporalCliAtHand({ log: () => {} }).catch(() => null)) !== null };

/**
 * vitest's order (longest or failed first from the last run's results, else largest first), except
 * that the files needing a Go-built tool that is not built yet go last: `npm test` is building
 * it in the background meanwhile (global-setup.ts), and the rest of the suite runs first instead of
 * a worker waiting for the build (wait-for-tools.ts). The temporal CLI counts as such a tool for the
 * files that need Temporal (temporal-files.ts). With every tool built, the order is vitest's.
 */
export class ToolsLastSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const ids = sorted.map((spec) => spec.moduleId);
    const graph = new ImportGraph();
    const [tools, temporal] = await Promise.all([toolsOf(ids, graph), temporalFilesOf(ids, graph)]);
    return waitingLast(sorted, (spec) => [...(tools.get(spec.moduleId) ?? []), ...(temporal.has(spec.moduleId) ? [TEMPORAL] : [])]);
  }
}
