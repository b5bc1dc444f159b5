import { sweepExpired } from '../credits/ledger.ts';
import type { Db } from '../db/pool.ts';
import type { WorkerMetrics } from '../metrics/worker.ts';

/**
 * One sweeper pass: close every open reservation past its expiry (its workflow ended without
 * settling or releasing: terminated, timed out). The ledger releases it, or charges what the run
 * had already persisted (credits/ledger.ts sweepExpired); both are counted in the worker's metrics.
 */
export async function sweepOnce(db: Db, metrics: WorkerMetrics, log: (msg: string) => void): Promise<string[]> {
  try {
    const { ids, settled, charged, returned } = await sweepExpired(db);
    if (ids.length) {
      metrics.reservationsSwept.inc({}, ids.length);
      metrics.reservations.inc({ event: 'swept' }, ids.length);
      metrics.credits.inc({ event: 'swept' }, returned);
      metrics.credits.inc({ event: 'swept_charged' }, charged);
      log(`sweeper closed ${ids.length} expired reservation(s) (${settled} charged for a persisted analysis: ${charged} credit(s); ${returned} credit(s) returned): ${ids.join(', ')}`);
    }
    return ids;
  } catch (err) {
    metrics.sweeperFailures.inc({});
    log(`sweeper failed: ${(err as Error).message}`);
    return [];
  }
}
