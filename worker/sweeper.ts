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
    const ids = await sweepExpired(db);
    if (ids.length) {
      const r = await db.query<{ returned: string; charged: string; settled: string }>(
        `SELECT coalesce(sum(amount - coalesce(settled_amount, 0)), 0) AS returned, coalesce(sum(settled_amount), 0) AS charged,
                count(*) FILTER (WHERE status = 'settled') AS settled
           FROM reservations WHERE id = ANY($1)`,
        [ids],
      );
      const { returned, charged, settled } = r.rows[0] ?? { returned: '0', charged: '0', settled: '0' };
      metrics.reservationsSwept.inc({}, ids.length);
      metrics.reservations.inc({ event: 'swept' }, ids.length);
      metrics.credits.inc({ event: 'swept' }, Number(returned));
      metrics.credits.inc({ event: 'swept_charged' }, Number(charged));
      log(`sweeper closed ${ids.length} expired reservation(s) (${settled} charged for a persisted analysis: ${charged} credit(s); ${returned} credit(s) returned): ${ids.join(', ')}`);
    }
    return ids;
  } catch (err) {
    metrics.sweeperFailures.inc({});
    log(`sweeper failed: ${(err as Error).message}`);
    return [];
  }
}
