import { QueryClient, useInfiniteQuery, useQuery, type keepPreviousData, type QueryKey } from '@tanstack/react-query';
import { call, ConsoleError } from './api.ts';

/**
 * The console's data cache (TanStack Query): every section reads a workspace's data through it, so
 * moving between sections shows what was read a moment ago while it refetches, and an action
 * refreshes exactly what it changed (`invalidate` in useAction). Coming back to the tab refetches,
 * as credits and batches move while the page is open.
 */
export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: 5_000,
      refetchOnWindowFocus: true,
      // A 4xx (signed out, no such workspace, not allowed) will not change by asking again.
      retry: (count, err) => !(err instanceof ConsoleError && err.status < 500) && count < 2,
    },
  },
});

/** The cache key of a workspace's data: `ws(id, 'keys')`; `ws(id)` covers all of it. */
export const ws = (workspaceId: string, ...rest: string[]): QueryKey => ['workspace', workspaceId, ...rest];

/** A GET of the console's API, cached under `key`. */
export function useGet<T>(
  key: QueryKey,
  path: string,
  opts: { enabled?: boolean; refetchInterval?: number | false; placeholderData?: typeof keepPreviousData; staleTime?: number } = {},
) {
  return useQuery({ queryKey: key, queryFn: () => call<T>('GET', path), ...opts });
}

/**
 * A keyset-paged GET (`{…, next}` with `?cursor=`), cached under `key`: "Show older" is
 * `fetchNextPage()`; a refetch reads the pages shown again from the newest.
 */
export function usePages<T extends { next: string | null }>(key: QueryKey, path: string) {
  return useInfiniteQuery({
    queryKey: key,
    queryFn: ({ pageParam }) => call<T>('GET', pageParam ? `${path}${path.includes('?') ? '&' : '?'}cursor=${encodeURIComponent(pageParam)}` : path),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next,
  });
}
