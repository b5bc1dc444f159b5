import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { processCpuShares, type CpuShares } from '../core/cpu-shares.ts';
import type { WorkerMetrics } from '../metrics/worker.ts';

/**
 * Every activity execution's share of the worker's CPU (core/cpu-shares.ts), observed by
 * activity type when it ends, failed or not: the vendor calls (prompt, the photo's decode and
 * resize, the SDK's request and answer, the check), the reservation and the persist.
 */
export function activityCpuInterceptor(metrics: WorkerMetrics, shares: CpuShares = processCpuShares): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const unit = {};
        shares.start(unit);
        try {
          return await next(input);
        } finally {
          metrics.activityCpu.observe({ activity: ctx.info.activityType }, shares.stop(unit));
        }
      },
    },
  });
}
