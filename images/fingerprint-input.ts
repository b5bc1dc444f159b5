import { validationFailed } from '../core/errors.ts';
import { decodeBase64Image } from './base64.ts';
import { fetchImage, type FetchImageOptions } from './fetch.ts';
import { fingerprint, type Fingerprint } from './fingerprint.ts';
import { probeImage } from './probe.ts';

/**
 * Fingerprints one request image without keeping it (lookup has no side effects): the same read
 * (SSRF-safe fetch or base64 decode) and the same acceptance rules (probe, then one decode) as
 * images/intake.ts, so a photo gets the SHA-256 and pHash here that analyze stored for it, and
 * nothing reaches the blob store.
 */

export interface FingerprintInputDeps {
  /** IMAGE_MAX_BYTES: largest image accepted, fetched or decoded. */
  maxBytes: number;
  /** IMAGE_MAX_PIXELS: largest width × height accepted. */
  maxPixels: number;
  /** Fetcher overrides (timeouts, redirects, address policy, resolver). */
  fetchOptions?: Partial<Omit<FetchImageOptions, 'maxBytes'>>;
}

export async function fingerprintInput(input: { url?: string; base64?: string }, deps: FingerprintInputDeps): Promise<Fingerprint> {
  if ((input.url === undefined) === (input.base64 === undefined)) throw validationFailed('Provide exactly one of an image URL or base64 image data');
  const bytes =
    input.url !== undefined
      ? (await fetchImage(input.url, { ...deps.fetchOptions, maxBytes: deps.maxBytes })).bytes
      : decodeBase64Image(input.base64!, deps.maxBytes);
  // Header checks (format, pixel cap) first; then fingerprint()'s one decode is the decode check.
  await probeImage(bytes, { maxPixels: deps.maxPixels, decode: false });
  try {
    return await fingerprint(bytes);
  } catch (err) {
    // As in intake: the probe's own decode check words the refusal precisely (HEVC, truncation).
    await probeImage(bytes, { maxPixels: deps.maxPixels, decode: true });
    throw err;
  }
}
