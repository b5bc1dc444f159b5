/**
 * The Temporal floor for bench/analyze.ts: workflows whose steps do nothing, run on the same dev
 * server, worker settings and client as the real saga, so the bench can show how much of a fresh
 * analysis is Temporal's own round trips and how much is Lenstack's work.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import { DB_LOCAL_OPTIONS, VENDOR_OPTIONS } from '../workflows/steps.ts';

export interface FloorActivities {
  nothing(): Promise<null>;
}

const local = proxyLocalActivities<FloorActivities>(DB_LOCAL_OPTIONS);
const remote = proxyActivities<FloorActivities>(VENDOR_OPTIONS);

/** Start, one workflow task, result. */
export async function emptyWorkflow(): Promise<null> {
  return null;
}

/**
 * The analyze saga's shape for one fresh photo, with the same options: a local activity
 * (reserveDelta), a regular activity (the vendor call), a local activity (persistAndSettle).
 */
export async function sagaShapeWorkflow(): Promise<null> {
  await local.nothing();
  await remote.nothing();
  return local.nothing();
}
