import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { createTestAccount, INTERNAL_SECRET, type TestAccount } from '../helpers/app.ts';
import { FUZZ_CATEGORIES, generate, INJECTABLE_METHODS, type FuzzCategory, type FuzzContext, type FuzzRequest } from './fuzz/generate.ts';
import { operationsOf, type Operation } from './fuzz/openapi.ts';
import { hostileScale, SEED, sizes } from './sizes.ts';
import { books, footprint, pipelineEndpoints, startHostileApp, type Footprint, type HostileApp } from './support/app.ts';
import { endpointOf, monitorEgress, type EgressMonitor } from './support/egress.ts';
import { inPool } from './support/pool.ts';
import { prng } from './support/prng.ts';
import { rawRequest } from './support/raw-http.ts';
import { envelopeOf, Tally, type Answer } from './support/report.ts';

/**
 * Malformed requests generated from our own /v1/openapi.json for every operation, with real live
 * and sandbox keys and the internal secret so authenticated routes are reached, against the real
 * app with rate limits on and the real analysis pipeline behind it (Temporal, a worker, the
 * simulated vendor): a malformed request that still passes validation runs a real analysis. Most
 * go through app.inject; a share (and everything only a socket can carry: bad methods,
 * conflicting lengths, raw bytes) over a real TCP socket. Targets: no 500, every error in the contract's
 * envelope with a request id, credits moved only by the analyses that answered 200 (exactly what
 * they said they charged, nothing left reserved), no registry row otherwise, no pollution.
 */

// Relative weights of the categories in the generated mix.
const WEIGHTS: Record<FuzzCategory, number> = {
  'wrong types': 10,
  'missing fields': 6,
  'extra and prototype keys': 8,
  'huge strings': 4,
  'deep nesting': 5,
  'unicode edge cases': 8,
  'numbers at and beyond bounds': 6,
  'arrays at and beyond limits': 5,
  'query strings': 8,
  'path parameters': 6,
  'content types': 6,
  'invalid JSON': 6,
  'auth headers': 9,
  'other headers': 6,
  methods: 5,
  'raw HTTP': 5,
};

// Node's HTTP server drops these duplicates and keeps the first (IncomingMessage); app.inject
// must see what a socket would, or it tests a request no client can send.
const FIRST_WINS = new Set(['authorization', 'content-type', 'content-length', 'user-agent', 'host', 'referer', 'from', 'if-modified-since', 'if-unmodified-since', 'max-forwards', 'proxy-authorization']);

const scale = hostileScale();
const { fuzzRequests, fuzzSocketShare } = sizes();
let h: HostileApp;
let port: number;
let ops: Operation[] = [];
let users: TestAccount[] = [];
let before: Footprint[] = [];
let egress: EgressMonitor;
const tally = new Tally();
const failures: string[] = [];
/** Failures grouped by what came back (status and the start of the body), to read them fast. */
const failureKinds = new Map<string, number>();
let sent = 0;
let overSocket = 0;
/** Requests per operation of the document. */
const perOperation = new Map<string, number>();
/**
 * Per user (index in `users`): billable answers (analyses, and enrichments of photos those
 * analyses put in the registry) and the credits they said they charged.
 */
const billed = new Map<number, { count: number; charged: number }>();
let analyses = 0;
/** Analyze requests the pipeline answered 502 PROVIDER_UNAVAILABLE / PROVIDER_ERROR. */
let pipelineRefused = 0;

beforeAll(async () => {
  h = await startHostileApp({ rateLimits: true, config: { TRUSTED_PROXIES: '127.0.0.1,::1' } });
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  port = (h.app.server.address() as AddressInfo).port;
  egress = monitorEgress();
  // Enough users that the 600/minute/user limit refuses only a small share.
  // Requests that pass validation run real analyses: enough credits that none is refused for want of them.
  users = await Promise.all(Array.from({ length: Math.ceil(fuzzRequests / 300) }, () => createTestAccount(h.db, { community: 10_000, purchased: 10 })));
  before = await Promise.all(users.map((u) => footprint(h.db, u.userId)));
}, 120_000);

afterAll(async () => {
  egress?.stop();
  await h?.close();
  if (scale === 'full') {
    console.log(tally.format(`OpenAPI request fuzzer (${scale}): ${sent} requests over ${ops.length} operations, ${overSocket} over a real socket`));
    console.log(`requests per operation: ${[...perOperation].sort((a, b) => b[1] - a[1]).map(([op, n]) => `${op} ${n}`).join(', ')}`);
  }
});

function toInjectHeaders(headers: Array<[string, string]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of headers) {
    const n = name.toLowerCase();
    if (out[n] === undefined) out[n] = value;
    else if (!FIRST_WINS.has(n)) out[n] = `${out[n]}, ${value}`;
  }
  return out;
}

async function send(req: FuzzRequest, i: number, socket: boolean): Promise<Answer> {
  // Every request from its own client address, so per-IP limits do not mask what is behind them.
  const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  if (socket) {
    const headers = req.headers.some(([n]) => n.toLowerCase() === 'x-forwarded-for') ? req.headers : [...req.headers, ['x-forwarded-for', ip] as [string, string]];
    return rawRequest(port, { method: req.method, target: req.target, headers, ...(req.body ? { body: req.body } : {}), ...(req.contentLength === false ? { contentLength: false } : {}) });
  }
  const started = performance.now();
  const res = await h.app.inject({
    method: req.method as 'GET',
    url: req.target,
    headers: toInjectHeaders(req.headers),
    remoteAddress: ip,
    ...(req.body ? { payload: req.body } : {}),
  });
  return { status: res.statusCode, body: res.body, headers: res.headers, ms: performance.now() - started };
}

const isAnalyze = (req: FuzzRequest) => req.op === 'POST /v1/analyze' || req.op === 'POST /v2/analyze';
/** The pipeline itself could not analyse what intake accepted: a spec 502, not a crash. */
const PIPELINE_REFUSED = /"code":"PROVIDER_(UNAVAILABLE|ERROR)"/;
const isPipelineRefusal = (req: FuzzRequest, a: Answer) => isAnalyze(req) && a.status === 502 && PIPELINE_REFUSED.test(a.body);
/**
 * The body budget (api/plugins/body-budget.ts) refused a large body, or a POST without a length
 * (counted as its route's whole limit), while others were being read: a retryable 503 with
 * Retry-After, by design. Which requests overlap depends on the mix the document's operations
 * draw, so it is not a crash to report.
 */
const BUDGET_REFUSED = /^\{"error":\{"code":"SERVICE_UNAVAILABLE","message":"This server is reading as many large uploads as it holds at once[^"]*","retryable":true,/;
const isBudgetRefusal = (a: Answer) => a.status === 503 && BUDGET_REFUSED.test(a.body) && a.headers['retry-after'] === '2';

/** Which test user an answered request was billed to: the live key in its (first) Authorization header. */
function userOf(req: FuzzRequest): number {
  const auth = req.headers.find(([n]) => n.toLowerCase() === 'authorization')?.[1] ?? '';
  return users.findIndex((u) => auth.includes(u.liveKey));
}

function check(req: FuzzRequest, a: Answer, socket: boolean): string | null {
  const where = `[${req.category}${socket ? ', socket' : ''}] ${JSON.stringify(req.method).slice(0, 20)} ${req.target.slice(0, 80)} (${req.note.slice(0, 120)})`;
  // CONNECT is handed to the server's 'connect' event, which we do not serve: Node hangs up.
  if (a.status === 0) return req.method === 'CONNECT' ? null : `${where}: no answer: ${a.body.slice(0, 160)}`;
  if (a.status >= 500 && !isPipelineRefusal(req, a) && !isBudgetRefusal(a)) return `${where}: HTTP ${a.status}: ${a.body.slice(0, 200)}`;
  if (a.status >= 400 && req.method !== 'HEAD') {
    const e = envelopeOf(a);
    if ('problem' in e) return `${where}: ${e.problem}`;
  }
  return null;
}

describe(`OpenAPI request fuzzer (${scale} size: ${fuzzRequests} requests)`, () => {
  it('finds every operation of the OpenAPI document', async () => {
    const doc = await h.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(doc.statusCode).toBe(200);
    // The internal-secret operations have their own document; GET /v1/usage is in both, once per method.
    const internal = await h.app.inject({ method: 'GET', url: '/v1/internal/openapi.json', headers: { 'x-internal-secret': INTERNAL_SECRET } });
    expect(internal.statusCode).toBe(200);
    const byId = new Map<string, Operation>();
    for (const op of [...operationsOf(doc.json()), ...operationsOf(internal.json())]) {
      const seen = byId.get(op.id);
      byId.set(op.id, seen ? { ...seen, params: [...seen.params, ...op.params.filter((p) => !seen.params.some((q) => q.name === p.name))], auth: 'bearer-or-internal' } : op);
    }
    ops = [...byId.values()];
    expect(ops.map((o) => o.id)).toEqual(expect.arrayContaining(['POST /v1/analyze', 'POST /v2/analyze', 'POST /v2/lookup', 'GET /v2/lookup', 'POST /v2/enrich', 'GET /v1/modules', 'GET /v1/usage', 'POST /v1/internal/evict', 'GET /v1/health', 'GET /v1/llms.txt']));
    // Not in the document, still served: the interactive docs page.
    ops.push({ id: 'GET /v1/docs', method: 'GET', path: '/v1/docs', params: [], body: null, auth: 'none' });
  });

  it('no 500, no non-envelope error, across every category and operation', async () => {
    const image = (await sharp({ create: { width: 8, height: 8, channels: 3, background: '#3a7' } }).png().toBuffer()).toString('base64');
    const ctx: FuzzContext = { ops, liveKeys: users.map((u) => u.liveKey), testKeys: users.map((u) => u.testKey), anonymousKey: ANONYMOUS_SANDBOX_KEY, internalSecret: INTERNAL_SECRET, imageBase64: image };
    const random = prng(SEED).fork('fuzz');
    const bag = FUZZ_CATEGORIES.flatMap((c) => Array.from({ length: WEIGHTS[c] }, () => c));
    const requests = Array.from({ length: fuzzRequests }, (_, i) => {
      const r = random.fork(`request-${i}`);
      const req = generate(ctx, r.pick(bag), r);
      const socket = req.socketOnly === true || !INJECTABLE_METHODS.has(req.method) || r.chance(fuzzSocketShare);
      return { req, socket };
    });
    await inPool(requests, 6, async ({ req, socket }, i) => {
      const a = await send(req, i, socket);
      sent += 1;
      if (socket) overSocket += 1;
      perOperation.set(req.op, (perOperation.get(req.op) ?? 0) + 1);
      tally.addCase(req.category);
      tally.add(req.category, a, { accepted: isPipelineRefusal(req, a) });
      if (isPipelineRefusal(req, a)) pipelineRefused += 1;
      if (a.status === 200 && (isAnalyze(req) || req.op === 'POST /v2/enrich')) {
        if (isAnalyze(req)) analyses += 1;
        const i = userOf(req);
        const body = JSON.parse(a.body) as { usage?: { creditsCharged?: number }; meta?: { creditsCharged?: number } };
        const charged = body.usage?.creditsCharged ?? body.meta?.creditsCharged ?? 0;
        const seen = billed.get(i) ?? { count: 0, charged: 0 };
        billed.set(i, { count: seen.count + 1, charged: seen.charged + charged });
      }
      const problem = check(req, a, socket);
      if (problem) {
        failures.push(problem);
        const kind = `${a.status} ${a.body.replace(/'[^']*'/g, "'…'").slice(0, 90)}`;
        failureKinds.set(kind, (failureKinds.get(kind) ?? 0) + 1);
      }
    });
    expect({ count: failures.length, kinds: Object.fromEntries(failureKinds), first: failures.slice(0, 12) }).toEqual({ count: 0, kinds: {}, first: [] });
    expect(sent).toBe(fuzzRequests);
    expect(overSocket).toBeGreaterThan(0);
  }, scale === 'full' ? 30 * 60_000 : 240_000);

  it('every category and every operation got malformed requests', () => {
    for (const c of FUZZ_CATEGORIES) expect(tally.row(c).requests, c).toBeGreaterThan(0);
    expect(ops.filter((o) => !perOperation.get(o.id)).map((o) => o.id)).toEqual([]);
  });

  it('moved credits only for the answers that said they charged, left nothing reserved, polluted no prototype, connected nowhere', async () => {
    if (scale === 'full' || pipelineRefused > 0) console.log(`fuzzer: ${analyses} analyses answered 200, ${pipelineRefused} answered 502 by the pipeline`);
    // A charge billed to none of our live keys would be a sandbox or anonymous answer charging someone.
    expect(billed.get(-1)?.charged ?? 0).toBe(0);
    for (const [i, u] of users.entries()) {
      const now = await footprint(h.db, u.userId);
      expect(await books(h.db, u.userId), `user ${i}`).toEqual({ reserved: 0, problems: [] });
      const mine = billed.get(i);
      if (!mine) {
        expect(now, `user ${i} got no analysis`).toEqual(before[i]);
        continue;
      }
      const spent = before[i]!.balance.community + before[i]!.balance.purchased - (now.balance.community + now.balance.purchased);
      expect(spent, `user ${i}: credits spent vs creditsCharged of its ${mine.count} billable answers`).toBe(mine.charged);
    }
    expect(Object.prototype).not.toHaveProperty('polluted');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const allowed = [{ address: '127.0.0.1', port }, endpointOf(h.config.DATABASE_URL, 5432), endpointOf(h.config.REDIS_URL, 6379), ...pipelineEndpoints(h)];
    expect(egress.unexpected(allowed)).toEqual([]);
  });
});
