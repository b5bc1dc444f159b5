import type { KeyListing } from './api.ts';
import { useGet, ws } from './query.ts';

/** The workspace's API keys from the cache (API keys lists them, Requests filters by them). */
export function useKeys(workspaceId: string) {
  return useGet<{ keys: KeyListing[] }>(ws(workspaceId, 'keys'), `/api/v1/workspaces/${workspaceId}/keys`);
}
