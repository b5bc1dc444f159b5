import type { Client } from '@temporalio/client';
import type { AnalyzeDeps } from '../analysis/service.ts';
import { AppError } from '../core/errors.ts';
import { trySessionLock, type SessionLock } from '../db/session-lock.ts';
import type { Uploads } from '../uploads/service.ts';
import { batchOfRequest, type BatchSummary } from './repository.ts';
import { boundBatch, submitBatch, type BatchSubmission } from './submit.ts';

/** Submissions under a request id one console process starts at once: each holds a Postgres connection. */
export const MAX_STARTING_SUBMISSIONS = 8;
/** Of those, one person's: nobody takes every slot of a process from everyone else. */
export const MAX_STARTING_PER_PERSON = 2;
let startingNow = 0;
const startingOf = new Map<string, number>();
const busy = () =>
  new AppError('SERVICE_UNAVAILABLE', 'Too many batch submissions are being started right now; send it again in 2 s', { headers: { 'retry-after': '2' } });

export interface ConsoleSubmission {
  workspaceId: string;
  personId: string;
  /** The person's uploads the batch takes, each with its place in the request (for messages). */
  refs: Array<{ id: string; at: string }>;
  submission: BatchSubmission;
  /** The browser's x-request-id and the fingerprint of the body; absent, the submission is bound to nothing. */
  binding?: { id: string; hash: string };
  /** Told when the uploads could not be deleted after the batch was made (they expire then). */
  onLeftover?: (err: unknown) => void;
}

/**
 * A batch submitted from the console over the person's finished uploads (docs/decisions.md,
 * "Console batches: one request id, one batch"): the uploads are claimed for it (400 naming one
 * that is not theirs, untaken and finished), the batch is made, and the uploads' rows go (the
 * bytes are the batch's now, by SHA-256 in the blob store).
 *
 * Under a request id: the same id and body get the batch the id made (another body, 409); one
 * attempt runs at a time in any process, under an advisory lock held by its own session (a twin
 * arriving meanwhile is 503, Retry-After 2, and claims nothing); claims a dead attempt left under
 * the id are taken again; uploads an attempt left claimed after making its batch are deleted.
 */
export async function submitConsoleBatch(pipeline: AnalyzeDeps & { temporal: Client; uploads: Uploads }, s: ConsoleSubmission): Promise<BatchSummary> {
  const { workspaceId, personId, refs, submission, binding } = s;
  const ids = refs.map((r) => r.id);
  const letGo = (takenBy?: string) => pipeline.uploads.remove(workspaceId, ids, takenBy).catch((err: unknown) => s.onLeftover?.(err));
  if (!binding) {
    // Claimed first: the same uploads sent twice at once start one batch, not two.
    await pipeline.uploads.claim(workspaceId, personId, refs);
    const summary = await submitBatch(pipeline, workspaceId, submission).catch(async (err: unknown) => {
      await pipeline.uploads.release(ids);
      throw err;
    });
    await letGo();
    return summary;
  }
  /** The batch this id made, with whatever claims an attempt that died after making it left. */
  const made = async () => {
    const batch = await boundBatch(pipeline, workspaceId, binding);
    if (batch) await letGo(binding.id);
    return batch;
  };
  const earlier = await made();
  if (earlier) return earlier;
  // Uploads that are not the person's to take are refused before a connection is opened for the lock.
  await pipeline.uploads.mayClaim(workspaceId, personId, refs, binding.id);
  const mine = startingOf.get(personId) ?? 0;
  if (startingNow >= MAX_STARTING_SUBMISSIONS || mine >= MAX_STARTING_PER_PERSON) throw busy();
  startingNow++;
  startingOf.set(personId, mine + 1);
  let held: SessionLock | null = null;
  try {
    held = await trySessionLock(pipeline.config.DATABASE_URL, `console-batch:${workspaceId}:${binding.id}`);
    if (!held) throw new AppError('SERVICE_UNAVAILABLE', `The submission of x-request-id ${binding.id} is being started; send it again in 2 s`, { headers: { 'retry-after': '2' } });
    const meanwhile = await made();
    if (meanwhile) return meanwhile;
    // Claims under this id are a dead attempt's (the lock says no other is alive): taken again.
    await pipeline.uploads.claim(workspaceId, personId, refs, binding.id);
    const lock = held;
    const summary = await submitBatch(pipeline, workspaceId, submission, binding).catch(async (err: unknown) => {
      // Given back unless a batch exists under the id: with the lock lost meanwhile (its connection
      // broke), a twin may have made it over these very claims.
      if (!lock.lost || !(await batchOfRequest(pipeline.db, workspaceId, binding.id).catch(() => true))) await pipeline.uploads.release(ids, binding.id);
      throw err;
    });
    await letGo(binding.id);
    return summary;
  } finally {
    startingNow--;
    const left = (startingOf.get(personId) ?? 1) - 1;
    if (left > 0) startingOf.set(personId, left);
    else startingOf.delete(personId);
    // Not awaited: the answer does not wait for the lock's connection to close.
    void held?.release();
  }
}
