import { describe, expect, it } from 'vitest';
import { createCpuShares } from '../../core/cpu-shares.ts';

/** The CPU meter behind lenstack_analysis_cpu_milliseconds and lenstack_activity_cpu_milliseconds. */
describe('CPU shares', () => {
  it('a unit alone gets all the CPU of its lifetime; overlapping units split what was used while they overlapped, and the shares add up', () => {
    let micros = 1_000_000;
    const shares = createCpuShares(() => micros);
    const a = {};
    const b = {};
    micros += 5_000; // before any unit: nobody's
    shares.start(a);
    micros += 4_000; // a alone
    shares.start(b);
    micros += 6_000; // a and b: 3 ms each
    expect(shares.size).toBe(2);
    expect(shares.stop(a)).toBe(7);
    micros += 2_000; // b alone
    expect(shares.stop(b)).toBe(5);
    expect(shares.size).toBe(0);
    // 7 + 5 = the 12 ms used while a unit was in flight.
  });

  it('stopping a unit twice, or one never started, gives 0 and leaves the others alone', () => {
    let micros = 0;
    const shares = createCpuShares(() => micros);
    const a = {};
    shares.start(a);
    micros += 1_000;
    expect(shares.stop({})).toBe(0);
    expect(shares.stop(a)).toBe(1);
    expect(shares.stop(a)).toBe(0);
  });

  it('measures this process: busy work shows up', () => {
    const shares = createCpuShares();
    const unit = {};
    shares.start(unit);
    // Busy until the process has used 20 ms of CPU (wall time would depend on the machine's load).
    const from = process.cpuUsage();
    let x = 0;
    while (process.cpuUsage(from).user + process.cpuUsage(from).system < 20_000) x += Math.sqrt(x + 1);
    expect(x).toBeGreaterThan(0);
    expect(shares.stop(unit)).toBeGreaterThanOrEqual(20);
  });
});
