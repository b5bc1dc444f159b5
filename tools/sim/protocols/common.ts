import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import type { VendorName } from '../../../core/config.ts';
import type { CacheRules, PromptSegment } from '../prompt-cache.ts';

/** Re-exported for the simulated vendors, which import this module only. */
export type { PromptSegment };

/** What the sim needs from any vendor's request, once parsed from that vendor's wire format. */
export interface SimCall {
  /** Model as requested; echoed back like the real APIs do. */
  model: string;
  /** The JSON schema the answer must satisfy, exactly as it arrived on the wire. */
  schema: Record<string, unknown>;
  schemaName: string;
  /** Decoded image bytes (base64 inline images only). */
  images: Buffer[];
  /** All prompt text the vendor would tokenize: system, user text, schema/tool definitions. */
  promptText: string;
  /** Anthropic only: whether the answer goes into a tool_use block or a text block. */
  answerAs: 'text' | 'tool';
  /** The prompt in the order the vendor's prompt cache reads it (prompt-cache.ts). */
  segments: PromptSegment[];
  /** The caching hint the request carried: OpenAI's prompt_cache_key, 'cache_control' for Anthropic; null without. */
  cacheHint: string | null;
}

export interface SimUsage {
  /** Every input token, the cached and cache-written ones included. */
  inputTokens: number;
  /** Of inputTokens, read from the prompt cache. */
  cachedTokens: number;
  /** Of inputTokens, written to the prompt cache (Anthropic). */
  cacheWriteTokens: number;
  outputTokens: number;
  imageTokens: number;
  textTokens: number;
}

/** Error statuses the sim can answer with; each protocol renders its vendor's error body. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 413 | 429 | 500;

export interface WireResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** An image's size as the vendor received it (upright). */
export interface Dimensions {
  width: number;
  height: number;
}

/**
 * One simulated vendor (`protocol`, exported by vendors/<vendor>/simulator.ts), loaded by name in
 * tools/sim/protocols/index.ts: everything the server (app.ts), its billing (billing.ts) and its
 * prompt cache (prompt-cache.ts) do differently per vendor. This module is the simulator's part the
 * simulated vendors share, and the only one of tools/ they import (.dependency-cruiser.cjs).
 */
export interface Protocol<V extends VendorName = VendorName> {
  vendor: V;
  /** Whether a POST to this path is the vendor's call, and the model the path names (Gemini's). */
  route(path: string): { model?: string } | undefined;
  /** Where its SDK's base URL points, for the 404 of an unknown path (`openai <sim>/v1`). */
  baseURLHint: string;
  /** Whether the request carries an API key the vendor's way (presence only, never the value). */
  hasKey(req: http.IncomingMessage, url: URL): boolean;
  /** The status of a request without a key. */
  missingKeyStatus: ErrorStatus;
  /**
   * Input tokens the vendor bills for one image of the size it received, from the vendor's
   * published rules, written apart from the product's estimate on purpose (billing.ts).
   */
  imageTokens(received: Dimensions): number;
  /** How its prompt cache works (prompt-cache.ts). */
  cache: CacheRules;
  /** Of an answered call's tokens, those its tokens-per-minute limit counts (rate-limits.ts). */
  limitedTokens(usage: SimUsage): number;
  /** A 429 as the vendor words it when it says how long to wait in the body too (Gemini); the wire unchanged otherwise. */
  withRetryDelay?(wire: WireResponse, retryAfterMs: number): WireResponse;
  parse(body: unknown, pathModel: string | undefined): SimCall;
  /** Answer with `answer` (a JSON value; for `invalid-json`, the raw non-JSON text). */
  success(call: SimCall, answer: { json: unknown } | { raw: string }, usage: SimUsage): WireResponse;
  error(status: ErrorStatus, message: string): WireResponse;
}

/** A request the real vendor would refuse; rendered in that vendor's error format. */
export class ProtocolError extends Error {
  constructor(
    readonly status: ErrorStatus,
    message: string,
  ) {
    super(message);
  }
}

/** `d` scaled by `factor` when that shrinks it (never enlarged), each side at least 1 px. */
export function shrink(d: Dimensions, factor: number): Dimensions {
  if (factor >= 1) return d;
  return { width: Math.max(1, Math.round(d.width * factor)), height: Math.max(1, Math.round(d.height * factor)) };
}

/** The usual bearer `Authorization` header. */
export const hasBearer = (req: http.IncomingMessage): boolean => /^Bearer\s+\S+/.test(req.headers.authorization ?? '');

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export function requireObject(v: unknown, what: string): Record<string, unknown> {
  if (!isObject(v)) throw new ProtocolError(400, `${what} must be an object`);
  return v;
}

export function requireString(v: unknown, what: string): string {
  if (typeof v !== 'string' || v === '') throw new ProtocolError(400, `${what}: Field required`);
  return v;
}

export function decodeBase64Image(data: unknown, what: string): Buffer {
  if (typeof data !== 'string' || data === '') throw new ProtocolError(400, `${what}: image data is required`);
  const buf = Buffer.from(data, 'base64');
  if (buf.length === 0) throw new ProtocolError(400, `${what}: image data is not valid base64`);
  return buf;
}

/** `alphabet`-only random id of `length` characters, like the vendors' message ids. */
export function randomId(length: number, alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += alphabet[b % alphabet.length];
  return out;
}

/** Visits every subschema with its JSON path (for the vendors' schema-dialect checks). */
export function walkSchema(schema: unknown, visit: (node: Record<string, unknown>, path: string) => void, path = '$'): void {
  if (!isObject(schema)) return;
  visit(schema, path);
  for (const key of ['items', 'additionalProperties', 'not', 'contains', 'if', 'then', 'else']) {
    if (isObject(schema[key])) walkSchema(schema[key], visit, `${path}.${key}`);
  }
  for (const key of ['anyOf', 'oneOf', 'allOf', 'prefixItems']) {
    const list = schema[key];
    if (Array.isArray(list)) list.forEach((s, i) => walkSchema(s, visit, `${path}.${key}[${i}]`));
  }
  for (const key of ['properties', '$defs', 'definitions', 'patternProperties']) {
    const map = schema[key];
    if (isObject(map)) for (const [k, s] of Object.entries(map)) walkSchema(s, visit, `${path}.${key}.${k}`);
  }
}
