import { photoFingerprint } from '../registry/photos.ts';
import type { PhotoHashes } from '../workflows/types.ts';
import { rethrowDomain, type ActivityDeps } from './deps.ts';

/** The photo steps that are neither billing nor a vendor call. */
export function photoActivities(deps: ActivityDeps) {
  return {
    /**
     * Perceptual hashes for photos of a run that no vendor call decoded (workflows/steps.ts
     * `withHashes`): the caller's registry's when it holds the photo, else the worker's decode of
     * the stored bytes (IMAGE_INVALID when they do not decode).
     */
    async photoHashes(input: { userId: string; sha256s: string[] }): Promise<Record<string, PhotoHashes>> {
      const out: Record<string, PhotoHashes> = {};
      for (const sha256 of input.sha256s) {
        out[sha256] = (await photoFingerprint(deps.db, input.userId, sha256)) ?? (await deps.workCopies.hashes(sha256).catch(rethrowDomain));
      }
      return out;
    },
  };
}
