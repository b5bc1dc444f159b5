import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { VendorName } from '../../core/config.ts';
import { VENDOR_NAMES } from '../../core/vendor-names.ts';
import { SIMULATED_HEADER } from '../../vendors/answer.ts';
import { checkAgainstSchema } from '../../vendors/output-schema.ts';
import sharp from 'sharp';
import { vendorImageTokens } from './billing.ts';
import { createPromptCache, describeSegments, type SegmentSeen } from './prompt-cache.ts';
import {
  behaviourPatchSchema,
  configPatchSchema,
  DEFAULT_BEHAVIOUR,
  FAILURE_MODES,
  type Behaviour,
  type BehaviourPatch,
  type FailureMode,
} from './behaviour.ts';
import { generate, violate } from '../../samples/generate.ts';
import { rngFor, sha256Hex, type Rng } from '../../samples/random.ts';
import { ProtocolError, type ErrorStatus, type Protocol, type SimCall, type WireResponse } from './protocols/common.ts';
import { SIM_PROTOCOLS } from './protocols/index.ts';
import { createVendorRateLimit, limitsPatchSchema, NO_LIMITS, retryAfterHeaders, type Admission, type Limits, type LimitsPatch } from './rate-limits.ts';

/**
 * The simulated vendor server: one HTTP server that speaks each vendor's wire protocol
 * (vendors/<vendor>/simulator.ts, loaded by name in protocols/index.ts) as its official SDK sends it, answers from the JSON schema in the request, and
 * can be told (at start or at runtime) to be slow or to fail. Every response carries the
 * `x-lenstack-simulated` header, so an adapter labels the answer simulated even when someone
 * points a "real" base URL at the sim.
 *
 * Routes (a vendor's SDK base URL is its protocol's `baseURLHint`):
 *   POST <the vendor's call path>                      each protocol's `route` (tools/sim/README.md)
 *   GET  /__sim/config   POST /__sim/config            behaviour per vendor (ConfigPatch body)
 *   GET  /__sim/stats    POST /__sim/reset             call counters; reset counters and behaviour
 *   GET  /__sim/limits   POST /__sim/limits            rate limits per vendor (rate-limits.ts)
 */

export const VENDORS: readonly VendorName[] = VENDOR_NAMES;
const PROTOCOLS: Record<VendorName, Protocol> = SIM_PROTOCOLS;

export interface SimVendorOptions {
  /** 0 (default) = any free port. */
  port?: number;
  host?: string;
  /** Mixed into every generated answer and every failure draw. */
  seed?: string | number;
  /** Starting behaviour for every vendor, then per vendor. */
  behaviour?: BehaviourPatch;
  vendors?: Partial<Record<VendorName, BehaviourPatch>>;
  /** Requests and tokens per minute, for every vendor ('all') then per vendor; none by default (rate-limits.ts). */
  limits?: Partial<Record<VendorName | 'all', LimitsPatch>>;
  /** Largest request body accepted (base64 images are ~4/3 of the bytes). */
  maxBodyBytes?: number;
  /** One line per call; the CLI logs them, tests leave it silent. */
  log?: (line: string) => void;
}

export interface ImageSeen {
  width: number;
  height: number;
  bytes: number;
  /** The SHA-256 of the image's bytes as they arrived. */
  sha256: string;
  /** Tokens billed for this image (after the vendor's own downscaling, if it were larger), by the
   *  vendors' published rules as the sim implements them (tools/sim/billing.ts), not the product's. */
  tokens: number;
}

export interface LastCall {
  model: string;
  schemaName: string;
  outcome: 'ok' | FailureMode;
  images: ImageSeen[];
  imageTokens: number;
  textTokens: number;
  /** Every input token, the cached and cache-written ones included. */
  inputTokens: number;
  /** Of inputTokens, read from the simulated prompt cache (prompt-cache.ts). */
  cachedTokens: number;
  /** Of inputTokens, written to it (Anthropic breakpoints). */
  cacheWriteTokens: number;
  outputTokens: number;
  /** The caching hint the request carried (OpenAI's prompt_cache_key, 'cache_control'), or null. */
  cacheHint: string | null;
  /** The prompt as the vendor's cache read it: per segment its kind, tokens and prefix hash. */
  segments: SegmentSeen[];
}

export interface VendorStats {
  /** Every request that reached this vendor's endpoint, well-formed or not. */
  calls: number;
  succeeded: number;
  /** Simulated failures, by mode. */
  failed: Record<FailureMode, number>;
  /** Requests refused as the real vendor would (missing key, malformed body, bad schema). */
  refused: number;
  /** Calls whose client went away before the answer (stall, or abort during latency). */
  aborted: number;
  /** Calls answered 429 because they were beyond the vendor's rate limits (not `failed.http429`). */
  rateLimited: number;
  last: LastCall | null;
  /** The SHA-256 of every image received, oldest first (the latest UPLOADS_KEPT). */
  uploads: string[];
}

/** Image hashes kept per vendor in its stats. */
const UPLOADS_KEPT = 10_000;

export type SimStats = Record<VendorName, VendorStats>;

export interface SimVendor {
  url: string;
  port: number;
  /**
   * Patch a vendor's behaviour. Its seeded failure sequence starts afresh, unless
   * `keepFailureSequence` (a driver changing modes often, which would replay the same first draws).
   */
  setBehaviour(vendor: VendorName | 'all', patch: BehaviourPatch, opts?: { keepFailureSequence?: boolean }): void;
  behaviour(vendor: VendorName): Behaviour;
  /** Patch a vendor's rate limits (0 = unlimited); the calls already counted stay counted. */
  setLimits(vendor: VendorName | 'all', patch: LimitsPatch): void;
  limits(vendor: VendorName): Limits;
  stats(): SimStats;
  /**
   * Calls being answered now, across vendors, and the most there were at once since the start,
   * the last reset or the last `resetPeak` (how a test shows a cap on calls in flight held).
   */
  concurrency(): { inFlight: number; peak: number };
  resetPeak(): void;
  /**
   * Hold every call that arrives from now on before it is answered, until `release()` (or
   * `reset()`): a test can then show work is provably mid-call, without betting on a latency.
   */
  hold(): void;
  /** Calls waiting on `hold()` right now. */
  held(): number;
  /** Answer every held call and stop holding. */
  release(): void;
  /** Zero the counters, empty the prompt caches and restore the starting behaviour. */
  reset(): void;
  close(): Promise<void>;
}

/** Prompt text → tokens, the usual ~4 characters per token estimate. */
export function estimateTextTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

const emptyStats = (): VendorStats => ({
  calls: 0,
  succeeded: 0,
  failed: Object.fromEntries(FAILURE_MODES.map((m) => [m, 0])) as Record<FailureMode, number>,
  refused: 0,
  aborted: 0,
  rateLimited: 0,
  last: null,
  uploads: [],
});

function route(method: string, path: string): { vendor: VendorName; model?: string } | undefined {
  if (method !== 'POST') return undefined;
  for (const vendor of VENDORS) {
    const match = PROTOCOLS[vendor].route(path);
    if (match) return { vendor, ...match };
  }
  return undefined;
}

class BodyTooLarge extends Error {}

async function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** An image's size as a viewer shows it (EXIF orientations 5–8 swap the sides), as a vendor reads it. */
async function displayedSize(bytes: Buffer): Promise<{ width: number; height: number }> {
  const m = await sharp(bytes, { failOn: 'error' }).metadata();
  if (!m.width || !m.height) throw new Error('not a decodable image');
  return (m.orientation ?? 1) >= 5 ? { width: m.height, height: m.width } : { width: m.width, height: m.height };
}

/** Resolves after `ms`, or early (false) when the client goes away. */
function waitOrClose(res: http.ServerResponse, ms: number | null): Promise<boolean> {
  return new Promise((resolve) => {
    if (res.destroyed || res.closed) return resolve(false);
    const onClose = () => {
      if (timer) clearTimeout(timer);
      resolve(false);
    };
    const timer = ms === null ? undefined : setTimeout(() => {
      res.off('close', onClose);
      resolve(true);
    }, ms);
    res.once('close', onClose);
  });
}

export async function startSimVendor(opts: SimVendorOptions = {}): Promise<SimVendor> {
  const seed = String(opts.seed ?? 'lenstack-sim');
  const log = opts.log ?? (() => {});
  const maxBody = opts.maxBodyBytes ?? 100 * 1024 * 1024;

  const initial = Object.fromEntries(
    VENDORS.map((v) => [
      v,
      behaviourPatchSchema.required().parse({ ...DEFAULT_BEHAVIOUR, ...opts.behaviour, ...opts.vendors?.[v] }),
    ]),
  ) as Record<VendorName, Behaviour>;
  const behaviours = { ...initial };
  const initialLimits = Object.fromEntries(
    VENDORS.map((v) => [v, { ...NO_LIMITS, ...limitsPatchSchema.parse({ ...opts.limits?.all, ...opts.limits?.[v] }) }]),
  ) as Record<VendorName, Limits>;
  const rateLimits = Object.fromEntries(VENDORS.map((v) => [v, createVendorRateLimit(initialLimits[v])])) as Record<VendorName, ReturnType<typeof createVendorRateLimit>>;
  function setLimits(vendor: VendorName | 'all', patch: LimitsPatch): void {
    for (const v of vendor === 'all' ? VENDORS : [vendor]) rateLimits[v].set(patch);
  }
  const promptCache = createPromptCache();
  const failureRng = {} as Record<VendorName, Rng>;
  const counters = {} as SimStats;
  const restartFailures = (v: VendorName) => {
    failureRng[v] = rngFor(`${seed}|failures|${v}`);
  };
  for (const v of VENDORS) {
    restartFailures(v);
    counters[v] = emptyStats();
  }

  function setBehaviour(vendor: VendorName | 'all', patch: BehaviourPatch, opts: { keepFailureSequence?: boolean } = {}): void {
    const valid = behaviourPatchSchema.parse(patch);
    for (const v of vendor === 'all' ? VENDORS : [vendor]) {
      behaviours[v] = { ...behaviours[v], ...valid };
      // A new behaviour starts a fresh, reproducible failure sequence.
      if (!opts.keepFailureSequence) restartFailures(v);
    }
  }

  function send(res: http.ServerResponse, wire: WireResponse): void {
    if (res.destroyed || res.writableEnded) return;
    res.writeHead(wire.status, {
      'content-type': 'application/json',
      [SIMULATED_HEADER]: 'true',
      ...wire.headers,
    });
    res.end(JSON.stringify(wire.body));
  }

  async function answer(vendor: VendorName, call: SimCall, res: http.ServerResponse, admission: Extract<Admission, { ok: true }>): Promise<void> {
    const protocol = PROTOCOLS[vendor];
    const stats = counters[vendor];
    const b = behaviours[vendor];
    const failure: FailureMode | undefined = b.failRate > 0 && failureRng[vendor]() < b.failRate ? b.failure : undefined;
    const started = Date.now();

    if (failure === 'stall') {
      stats.failed.stall++;
      await waitOrClose(res, null);
      stats.aborted++;
      log(`[SIM] ${vendor} model=${call.model} STALL until the client aborted (${Date.now() - started} ms)`);
      return;
    }
    if (b.latencyMs > 0 && !(await waitOrClose(res, b.latencyMs))) {
      stats.aborted++;
      return;
    }
    if (gate) {
      heldNow++;
      const open = await Promise.race([gate.opened.then(() => true), waitOrClose(res, null)]);
      heldNow--;
      if (!open) {
        stats.aborted++;
        return;
      }
    }
    if (failure === 'http500' || failure === 'http429' || failure === 'http400') {
      stats.failed[failure]++;
      const status = Number(failure.slice(4)) as ErrorStatus;
      send(res, protocol.error(status, `Simulated failure (${failure}) from the Lenstack vendor simulator.`));
      log(`[SIM] ${vendor} model=${call.model} FAIL ${failure}`);
      return;
    }

    const images: ImageSeen[] = [];
    for (const [i, bytes] of call.images.entries()) {
      let size: { width: number; height: number };
      try {
        size = await displayedSize(bytes);
      } catch {
        stats.refused++;
        send(res, protocol.error(400, `Could not process image ${i}: the data is not a decodable image.`));
        return;
      }
      const sha256 = sha256Hex(bytes);
      images.push({ ...size, bytes: bytes.length, sha256, tokens: vendorImageTokens(vendor, size) });
      stats.uploads.push(sha256);
      if (stats.uploads.length > UPLOADS_KEPT) stats.uploads.shift();
    }
    const imageTotal = images.reduce((n, im) => n + im.tokens, 0);
    const textTokens = estimateTextTokens(call.promptText);
    const segments = describeSegments(call.segments, call.images, images.map((im) => im.tokens), estimateTextTokens);
    const cache = promptCache.use(vendor, call.model, segments);
    const seedKey = `${seed}|${sha256Hex(Buffer.concat(call.images))}`;
    const valid = generate(call.schema, { seedKey });
    const check = checkAgainstSchema(call.schema, valid);
    if (!check.ok) {
      // A generator bug must be loud, never a quiet "vendor" answer.
      const message = `SIMULATOR BUG: generated answer does not match the request schema: ${check.errors.join('; ')}`;
      log(`[SIM] ${vendor} ${message}`);
      send(res, protocol.error(500, message));
      return;
    }

    let body: { json: unknown } | { raw: string };
    let outcome: LastCall['outcome'] = 'ok';
    if (failure === 'invalid-json') {
      body = { raw: `Here is the analysis: ${JSON.stringify(valid).slice(0, 40)}` };
      outcome = failure;
    } else if (failure === 'schema-invalid') {
      body = { json: violate(call.schema, valid, (v) => checkAgainstSchema(call.schema, v).ok) };
      outcome = failure;
    } else body = { json: valid };
    const outputTokens = estimateTextTokens('raw' in body ? body.raw : JSON.stringify(body.json));
    const inputTokens = imageTotal + textTokens;
    // Segments round on their own: never more cached than the whole input.
    const cachedTokens = Math.min(cache.cachedTokens, inputTokens);
    const cacheWriteTokens = Math.min(cache.cacheWriteTokens, inputTokens - cachedTokens);
    const usage = { inputTokens, cachedTokens, cacheWriteTokens, outputTokens, imageTokens: imageTotal, textTokens };
    admission.addTokens(protocol.limitedTokens(usage));
    if (failure) stats.failed[failure]++;
    else stats.succeeded++;
    stats.last = { model: call.model, schemaName: call.schemaName, outcome, images, ...usage, cacheHint: call.cacheHint, segments };
    send(res, protocol.success(call, body, usage));
    const sizes = images.map((im) => `${im.width}x${im.height}`).join(',') || 'none';
    log(`[SIM] ${vendor} model=${call.model} image=${sizes} in=${usage.inputTokens} cached=${cachedTokens} out=${outputTokens} ${outcome} ${Date.now() - started} ms`);
  }

  async function control(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    const json = (status: number, body: unknown) => send(res, { status, body });
    const current = () => ({ ...behaviours });
    if (req.method === 'GET' && path === '/__sim/stats') return json(200, structuredClone(counters));
    if (req.method === 'GET' && path === '/__sim/config') return json(200, current());
    const currentLimits = () => Object.fromEntries(VENDORS.map((v) => [v, rateLimits[v].limits()]));
    if (req.method === 'GET' && path === '/__sim/limits') return json(200, currentLimits());
    if (req.method === 'POST' && path === '/__sim/limits') {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse((await readBody(req, 1024 * 1024)) || '{}') as Record<string, unknown>;
      } catch (e) {
        return json(400, { error: `body is not JSON: ${e instanceof Error ? e.message : String(e)}` });
      }
      for (const [v, patch] of Object.entries(body)) {
        const parsed = limitsPatchSchema.safeParse(patch);
        if ((v !== 'all' && !VENDORS.includes(v as VendorName)) || !parsed.success) return json(400, { error: `invalid limits for ${v}` });
        setLimits(v as VendorName | 'all', parsed.data);
      }
      return json(200, currentLimits());
    }
    if (req.method === 'POST' && path === '/__sim/reset') {
      reset();
      return json(200, { ok: true, behaviours: current() });
    }
    if (req.method === 'POST' && path === '/__sim/config') {
      let parsed;
      try {
        parsed = configPatchSchema.safeParse(JSON.parse((await readBody(req, 1024 * 1024)) || '{}'));
      } catch (e) {
        return json(400, { error: `body is not JSON: ${e instanceof Error ? e.message : String(e)}` });
      }
      if (!parsed.success) return json(400, { error: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) });
      const { all, ...perVendor } = parsed.data;
      if (all) setBehaviour('all', all);
      for (const [v, patch] of Object.entries(perVendor)) if (patch) setBehaviour(v as VendorName, patch);
      return json(200, current());
    }
    return json(404, { error: `unknown simulator control route ${req.method} ${path}` });
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim.invalid');
    if (url.pathname.startsWith('/__sim/')) return control(req, res, url.pathname);
    const target = route(req.method ?? 'GET', url.pathname);
    if (!target) {
      // Mostly a base URL mistake: say which base URL each SDK needs.
      return send(res, {
        status: 404,
        body: {
          error: {
            message: `Lenstack vendor simulator: no route ${req.method} ${url.pathname}. Base URLs: ${VENDORS.map((v) => PROTOCOLS[v].baseURLHint).join(', ')}.`,
          },
        },
      });
    }
    const { vendor } = target;
    const protocol = PROTOCOLS[vendor];
    const stats = counters[vendor];
    stats.calls++;
    let call: SimCall;
    try {
      if (!protocol.hasKey(req, url)) {
        throw new ProtocolError(protocol.missingKeyStatus, 'Missing API key (the simulator accepts any non-empty key).');
      }
      const text = await readBody(req, maxBody);
      let raw: unknown;
      try {
        raw = JSON.parse(text);
      } catch {
        throw new ProtocolError(400, 'We could not parse the JSON body of your request.');
      }
      call = protocol.parse(raw, target.model);
    } catch (e) {
      stats.refused++;
      if (e instanceof BodyTooLarge) return send(res, protocol.error(413, `Request body exceeds ${maxBody} bytes.`));
      if (e instanceof ProtocolError) {
        log(`[SIM] ${vendor} refused ${e.status}: ${e.message}`);
        return send(res, protocol.error(e.status, e.message));
      }
      throw e;
    }
    const admission = rateLimits[vendor].admit(Date.now());
    if (!admission.ok) {
      stats.rateLimited++;
      log(`[SIM] ${vendor} model=${call.model} 429 beyond ${JSON.stringify(rateLimits[vendor].limits())}, retry after ${admission.retryAfterMs} ms`);
      const wire = protocol.error(429, `Rate limit reached (simulated): ${JSON.stringify(rateLimits[vendor].limits())} per minute. Please try again later.`);
      return send(res, { ...(protocol.withRetryDelay?.(wire, admission.retryAfterMs) ?? wire), headers: { ...wire.headers, ...retryAfterHeaders(admission.retryAfterMs) } });
    }
    inFlight++;
    peak = Math.max(peak, inFlight);
    try {
      await answer(vendor, call, res, admission);
    } finally {
      inFlight--;
    }
  }

  let inFlight = 0;
  let peak = 0;
  let gate: { opened: Promise<void>; open: () => void } | null = null;
  let heldNow = 0;
  function release(): void {
    gate?.open();
    gate = null;
  }

  function reset(): void {
    release();
    promptCache.reset();
    peak = inFlight;
    for (const v of VENDORS) {
      behaviours[v] = { ...initial[v] };
      counters[v] = emptyStats();
      restartFailures(v);
      rateLimits[v].reset(initialLimits[v]);
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      log(`[SIM] internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      send(res, { status: 500, body: { error: { message: 'simulator internal error' } } });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;

  return {
    url,
    port: address.port,
    setBehaviour,
    behaviour: (v) => ({ ...behaviours[v] }),
    setLimits,
    limits: (v) => rateLimits[v].limits(),
    stats: () => structuredClone(counters),
    concurrency: () => ({ inFlight, peak }),
    resetPeak: () => {
      peak = inFlight;
    },
    hold: () => {
      if (gate) return;
      let open = () => {};
      const opened = new Promise<void>((resolve) => (open = resolve));
      gate = { opened, open };
    },
    held: () => heldNow,
    release,
    reset,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Stalled calls and idle keep-alive sockets would hold close() open forever.
        server.closeAllConnections();
      }),
  };
}
