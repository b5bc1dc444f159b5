/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function inPool<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(lanes);
  return out;
}

/**
 * A seeded, stratified draw of `n` items: every group keeps at least `min` (or all it has), the
 * rest is shared in proportion to group size. `n` at or above the total keeps everything.
 */
export function stratified<T>(items: readonly T[], groupOf: (item: T) => string, n: number, random: () => number, min = 2): T[] {
  if (n >= items.length) return [...items];
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const g = groupOf(item);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g)!.push(item);
  }
  const quota = new Map<string, number>();
  for (const [g, list] of groups) quota.set(g, Math.min(list.length, min));
  let left = n - [...quota.values()].reduce((a, b) => a + b, 0);
  const total = items.length;
  for (const [g, list] of groups) {
    const extra = Math.min(list.length - quota.get(g)!, Math.max(0, Math.floor(((n - groups.size * min) * list.length) / total)));
    quota.set(g, quota.get(g)! + extra);
    left -= extra;
  }
  // Hand out what rounding left over, largest groups first.
  for (const [g, list] of [...groups].sort((a, b) => b[1].length - a[1].length)) {
    if (left <= 0) break;
    const extra = Math.min(left, list.length - quota.get(g)!);
    quota.set(g, quota.get(g)! + extra);
    left -= extra;
  }
  const out: T[] = [];
  for (const [g, list] of groups) out.push(...shuffle(list, random).slice(0, quota.get(g)!));
  return out;
}

export function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
