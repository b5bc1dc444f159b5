/**
 * `fn` over `items` with at most `limit` calls in flight; results keep the input order.
 * The first failure stops new items from starting; the calls already in flight are awaited (so
 * nothing the map started is still running, or still writing, when it rejects), then the map
 * rejects with that first failure.
 */
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failure: { err: unknown } | null = null;
  await Promise.all(
    Array.from({ length: Math.min(Math.max(1, limit), items.length) }, async () => {
      while (failure === null && next < items.length) {
        const i = next++;
        try {
          out[i] = await fn(items[i]!, i);
        } catch (err) {
          failure ??= { err };
        }
      }
    }),
  );
  if (failure !== null) throw (failure as { err: unknown }).err;
  return out;
}
