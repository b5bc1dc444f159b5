/**
 * The process's CPU time shared out among the units of work in flight (an HTTP request, an
 * activity). Node cannot say which async work a CPU microsecond went to, so between two events
 * (a unit starting or ending) the CPU the process used is split in equal shares among the units
 * in flight then. Alone, a unit gets exactly the process's CPU over its lifetime (the thread pool's
 * image work included); under concurrency the shares still add up to the process's CPU while any
 * unit was in flight, so summed over units they reconcile with process_cpu_seconds_total, but a
 * unit's own figure is an equal share, not its own measurement. CPU used while nothing is in
 * flight (timers, the sweeper, garbage collection between requests) is no unit's.
 */
export interface CpuShares {
  start(unit: object): void;
  /** The unit's share in milliseconds; 0 for a unit never started (or already stopped). */
  stop(unit: object): number;
  /** Units in flight. */
  readonly size: number;
}

/** process.cpuUsage() as one number: user + system microseconds. */
const processCpuMicros = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

export function createCpuShares(cpuMicros: () => number = processCpuMicros): CpuShares {
  const shares = new Map<object, number>();
  let last = cpuMicros();
  const settle = () => {
    const now = cpuMicros();
    if (shares.size > 0) {
      const each = (now - last) / shares.size;
      for (const [unit, used] of shares) shares.set(unit, used + each);
    }
    last = now;
  };
  return {
    start(unit) {
      settle();
      shares.set(unit, 0);
    },
    stop(unit) {
      const used = shares.get(unit);
      if (used === undefined) return 0;
      settle();
      const total = shares.get(unit)!;
      shares.delete(unit);
      return total / 1000;
    },
    get size() {
      return shares.size;
    },
  };
}

/** The one meter of this process: API requests and worker activities in one process share its CPU. */
export const processCpuShares = createCpuShares();
