import type { Fingerprint } from './fingerprint.ts';
import { checkedFingerprint, readInput, type IntakeDeps, type IntakeInput } from './intake.ts';
import { probeImage } from './probe.ts';

/**
 * Fingerprints one request image without keeping it (lookup has no side effects): the same read
 * (SSRF-safe fetch or base64 decode) and the same acceptance rules (probe, then one decode) as
 * images/intake.ts, so a photo gets the SHA-256 and pHash here that analyze stored for it, and
 * nothing reaches the blob store.
 */

/** IMAGE_MAX_BYTES, IMAGE_MAX_PIXELS and fetcher overrides, as for intake. */
export type FingerprintInputDeps = Omit<IntakeDeps, 'blobs'> & {
  /** The caller's connection: a HEIC/BMP decode still queued leaves when it aborts. */
  signal?: AbortSignal;
};

export async function fingerprintInput(input: IntakeInput, deps: FingerprintInputDeps): Promise<Fingerprint> {
  const bytes = await readInput(input, deps);
  // Header checks (format, pixel cap) first; then fingerprint()'s one decode is the decode check.
  await probeImage(bytes, { maxPixels: deps.maxPixels, decode: false });
  return checkedFingerprint(bytes, deps.maxPixels, deps.signal ? { signal: deps.signal } : {});
}
