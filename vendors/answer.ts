import type { VendorName } from '../core/config.ts';
import { abortedError, invalidOutput, messageOf, networkError, VendorError } from './errors.ts';
import type { VendorUsage, VisionResult } from './types.ts';

/** Steps every adapter shares once the vendor has answered or failed. */

/** Header the sim sets on every response: a result that carries it is labelled simulated. */
export const SIMULATED_HEADER = 'x-lenstack-simulated';

export const DEFAULT_MAX_OUTPUT_TOKENS = 8192;
/** Backstop per call; the activity's own timeout normally ends the call first (via `signal`). */
export const DEFAULT_TIMEOUT_MS = 120_000;

export interface AdapterOptions {
  apiKey: string;
  /** Undefined = the SDK's public default endpoint. */
  baseURL?: string | undefined;
  model: string;
  /** Pointed at sim/ on purpose (no key of our own). Results are labelled simulated either way
   * when the answer carries the sim's header. */
  simulated: boolean;
  timeoutMs?: number;
  /**
   * Send the vendor's prompt-caching hint (VENDOR_PROMPT_CACHE): Anthropic's `cache_control` on
   * the fixed prefix, OpenAI's `prompt_cache_key`. Off sends the same prompt without them.
   */
  promptCache: boolean;
}

export function providerLabel(vendor: VendorName, simulated: boolean): string {
  return simulated ? `${vendor} (simulated)` : vendor;
}

/**
 * Parses the model's text answer as JSON. Whether it fits the requested schema is judged once,
 * by the caller that asked for it (activities/vendor-call.ts, with the lens's own zod schema).
 */
/**
 * The result of an answer the vendor gave and billed, for every adapter alike: `check` reads the
 * JSON out of it, and a VendorError it throws (not JSON, truncated, refused) carries `usage`, so
 * the worker counts those tokens in its metrics and its vendor budget as it does for an answer it
 * keeps.
 */
export function billedAnswer(
  vendor: VendorName,
  usage: VendorUsage,
  answer: { simulated: boolean; image: { width: number; height: number; tokens: number } },
  check: () => unknown,
): VisionResult {
  let json: unknown;
  try {
    json = check();
  } catch (e) {
    if (e instanceof VendorError) e.usage = usage;
    throw e;
  }
  const { simulated, image } = answer;
  return { json, vendor, provider: providerLabel(vendor, simulated), simulated, ...usage, image: { width: image.width, height: image.height, tokens: image.tokens } };
}

export function parseAnswer(vendor: VendorName, text: string | null | undefined): unknown {
  if (text === null || text === undefined || text.trim() === '') throw invalidOutput(vendor, 'empty answer');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw invalidOutput(vendor, `answer is not JSON: ${messageOf(e)}`, e);
  }
}

/**
 * Last resort for errors an SDK did not classify: our own VendorError passes through; the caller's
 * abort wins; anything else (fetch failures, a non-JSON body on a 2xx) is the vendor being unable
 * to answer now, which retrying may fix.
 */
export function unclassified(vendor: VendorName, e: unknown, signal: AbortSignal | undefined): VendorError {
  if (e instanceof VendorError) return e;
  if (signal?.aborted) return abortedError(vendor, e);
  return networkError(vendor, messageOf(e), e);
}
