import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { ImportGraph } from '../../tools/scripts/import-graph.ts';
import { temporalCliAtHand } from '../../tools/scripts/temporal-cli.ts';
import { committedDurations, longestFirst } from './durations.ts';
import { toolsOf } from './go-tools.ts';
import { temporalFilesOf } from './temporal-files.ts';
import { waitingLast, type ToolState } from './waiting-last.ts';

/** Temporal as the sequencer sees it: ready when its CLI needs no build (global-setup.ts). */
const TEMPORAL: ToolState = { name: 'temporal', ready: async () => (await temporalCliAtHand({ log: () => {} }).catch(() => null)) !== null };

/**
 * Longest files first: from the last run's results (vitest's cache), or on a fresh clone, which has
 * none, from the committed durations (durations.ts); failed files first, as vitest puts them. Then
 * the files needing a Go-built tool that is not built yet go last: `npm test` is building it in the
 * background meanwhile (global-setup.ts), and the rest of the suite runs first instead of a worker
 * waiting for the build (wait-for-tools.ts). The temporal CLI counts as such a tool for the files
 * that need Temporal (temporal-files.ts). With every tool built, the order is the first one.
 */
export class ToolsLastSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const vitestOrder = await super.sort(files);
    const committed = await committedDurations();
    const root = this.ctx.config.root;
    const sorted = longestFirst(vitestOrder, (spec) => {
      const cached = this.ctx.cache.getTestSpecificationResult(spec);
      if (cached) return { failed: cached.failed, seconds: cached.duration / 1000 };
      return { seconds: committed.get(relative(root, spec.moduleId)) };
    });
    const ids = sorted.map((spec) => spec.moduleId);
    const graph = new ImportGraph();
    const [tools, temporal] = await Promise.all([toolsOf(ids, graph), temporalFilesOf(ids, graph)]);
    return waitingLast(sorted, (spec) => [...(tools.get(spec.moduleId) ?? []), ...(temporal.has(spec.moduleId) ? [TEMPORAL] : [])]);
  }
}
