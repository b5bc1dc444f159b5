import { createHash } from 'node:crypto';
import type { VisionRequest } from './types.ts';

/**
 * The fixed part of a vision prompt: the instructions and the answer schema, the same bytes for
 * every photo asked the same lenses (lenses/prompt.ts keeps caller data and the photo out of it).
 * Every adapter sends it first so the vendor's prompt cache can serve it (docs/decisions.md,
 * "Prompt caching").
 */
export function fixedPrefix(req: Pick<VisionRequest, 'system' | 'jsonSchema'>): string {
  return `${JSON.stringify(req.jsonSchema)}\u0000${req.system}`;
}

/**
 * OpenAI's `prompt_cache_key`: names the fixed prefix, so requests sharing it are routed to the
 * same cache. A hash of the prefix itself: equal prefixes, equal keys; no account, photo or request
 * data in it.
 */
export function promptCacheKey(req: Pick<VisionRequest, 'system' | 'jsonSchema'>): string {
  return `lenstack-${createHash('sha256').update(fixedPrefix(req)).digest('hex').slice(0, 32)}`;
}
