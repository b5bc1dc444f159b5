/**
 * `fn` over `items` with at most `limit` calls in flight; results keep the input order.
 * The first failure rejects the whole map and no further item is started.
 */
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  await Promise.all(
    Array.from({ length: Math.min(Math.max(1, limit), items.length) }, async () => {
      while (!failed && next < items.length) {
        const i = next++;
        try {
          out[i] = await fn(items[i]!, i);
        } catch (err) {
          failed = true;
          throw err;
        }
      }
    }),
  );
  return out;
}
