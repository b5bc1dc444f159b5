/**
 * A line of Linux's /proc/<pid>/stat (or /proc/<pid>/task/<tid>/stat), for the benches that
 * count CPU by process or thread (bench/analyze.ts, bench/fleet.ts). The name is in parentheses
 * and may hold spaces, so fields are counted after its closing one.
 */

/** CLK_TCK on Linux: the unit of utime and stime, and of /proc/stat's counters. */
export const CLK_TCK = 100;

/** The process's or thread's name (`comm`, at most 15 characters). */
export const commOf = (stat: string): string => stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));

/** CPU milliseconds (user + system) so far. */
export function cpuMsOf(stat: string): number {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}
