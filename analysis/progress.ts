import { AppError } from '../core/errors.ts';
import { WorkflowNotStarted } from './await-workflow.ts';

/** How far one request got: what its failure must undo (its request id, the blobs it wrote). */
export interface Progress {
  /** A workflow was started (or attached to) under this request's id. */
  started: boolean;
  /** That workflow is known to have ended (its result, a failure, was received). */
  ended: boolean;
  /** Blobs this request wrote (bytes nobody had stored before). */
  stored: string[];
  /** Uses of blobs its intake began (registry/photos.ts markBlobUse), ended with its run. */
  uses: string[];
}

export const newProgress = (): Progress => ({ started: false, ended: false, stored: [], uses: [] });

/** Await a workflow's answer, noting when its failure means the run has ended. */
export async function untilEnded<T>(progress: Progress, run: () => Promise<T>): Promise<T> {
  progress.started = true;
  try {
    return await run();
  } catch (err) {
    // 503: Temporal unreachable or this server shutting down; the run may go on, unless Temporal
    // refused its start outright.
    if (err instanceof WorkflowNotStarted || !(err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE')) progress.ended = true;
    throw err;
  }
}
