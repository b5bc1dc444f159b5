import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { toolsOf } from './go-tools.ts';
import { waitingLast } from './waiting-last.ts';

/**
 * vitest's order (longest or failed first from the last run's results, else largest first), except
 * that the files needing a Go-built tool that is not built yet go last: `npm test` is building
 * it in the background meanwhile (global-setup.ts), and the rest of the suite runs first instead of
 * a worker waiting for the build (wait-for-tools.ts). With every tool built, the order is vitest's.
 */
export class ToolsLastSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const tools = await toolsOf(sorted.map((spec) => spec.moduleId));
    return waitingLast(sorted, (spec) => tools.get(spec.moduleId) ?? []);
  }
}
