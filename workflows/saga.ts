import { CancellationScope, log } from '@temporalio/workflow';

/**
 * The saga's undo list. A step's compensation is added once that step succeeded; on failure they
 * run newest-first in a non-cancellable scope (a cancelled workflow still returns what it holds).
 * A compensation that fails is logged and skipped: the caller sees the failure that started the
 * unwinding, and the reservation's expiry lets the worker's sweeper close what is left.
 */
export class Compensations {
  private readonly undo: Array<{ step: string; run: () => Promise<unknown> }> = [];

  add(step: string, run: () => Promise<unknown>): void {
    this.undo.unshift({ step, run });
  }

  async run(cause: unknown): Promise<void> {
    await CancellationScope.nonCancellable(async () => {
      for (const { step, run } of this.undo) {
        try {
          await run();
        } catch (err) {
          log.error('compensation failed', { step, error: (err as Error).message, cause: (cause as Error)?.message });
        }
      }
    });
  }
}
