import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interactiveTaskQueue } from '../../core/config.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { createTestAccount, type TestAccount } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startCanary, type Canary } from '../images/servers.ts';
import { hostileScale, SEED, sizes } from './sizes.ts';
import { SSRF_CORPUS, type SsrfCase, type SsrfCategory } from './ssrf-corpus.ts';
import { analyzeWorkflowRequestIds, books, footprint, pipelineEndpoints, startHostileApp, type Footprint, type HostileApp } from './support/app.ts';
import { endpointOf, monitorEgress, type EgressMonitor } from './support/egress.ts';
import { prng } from './support/prng.ts';
import { inPool, stratified } from './support/pool.ts';
import { envelopeOf, Tally, type Answer } from './support/report.ts';
import { corpusResolver, startRedirectServer, type RedirectServer } from './support/ssrf-servers.ts';

/**
 * Every SSRF corpus URL through every endpoint that takes an image URL, against the real app
 * with the production address policy (only 127.0.0.2 is treated as public). Nothing may connect
 * to the loopback canary or anywhere else; every answer is 400 (blocked) or 422 (unreachable)
 * in the error envelope (docs/contract.md); nothing is billed or stored for a refused URL. The controls (URLs that must
 * work) run a real analysis through the real pipeline (Temporal, worker, simulated vendor).
 */

/** `analyze`: the live key of a user of its own, so the photos it analyzes never reach enrich's registry lookups. */
type KeyKind = 'live' | 'test' | 'analyze';
interface Slot {
  name: string;
  key: KeyKind;
  url: string;
  body(imageUrl: string): Record<string, unknown>;
  /** Status and code when the URL is fine (controls): how far an accepted image gets. */
  accepted: { status: number; code?: string };
}

const SLOTS: Slot[] = [
  { name: 'analyze imageUrl', key: 'analyze', url: '/v1/analyze', body: (u) => ({ imageUrl: u, modules: ['describe'] }), accepted: { status: 200 } },
  { name: 'analyze images[].url', key: 'analyze', url: '/v1/analyze', body: (u) => ({ images: [{ url: u }], modules: ['describe'] }), accepted: { status: 200 } },
  { name: 'lookup images', key: 'live', url: '/v2/lookup', body: (u) => ({ images: [u] }), accepted: { status: 200 } },
  { name: 'enrich imageUrl (live key)', key: 'live', url: '/v2/enrich', body: (u) => ({ imageUrl: u, formats: ['xmp'] }), accepted: { status: 404, code: 'PHOTO_NOT_IN_REGISTRY' } },
  { name: 'enrich imageUrl (sandbox key)', key: 'test', url: '/v2/enrich', body: (u) => ({ imageUrl: u, formats: ['xmp'] }), accepted: { status: 200 } },
];

const CODE_OF: Record<number, string> = { 400: 'VALIDATION_FAILED', 422: 'IMAGE_INVALID' };
// A refusal must never tell the caller what a name resolved to (it would map our internal DNS).
const LEAKED_ADDRESS = /\b127\.0\.0\.1\b|\[?::1\]?(?![\d:a-f])|169\.254\.169\.254|10\.0\.0\.1\b|192\.168\.1\.1\b|fd00::1|fe80::1/i;

const random = prng(SEED).fork('ssrf');
const cases = stratified(SSRF_CORPUS, (c) => c.category, sizes().ssrfUrls, random.next);
const categories = [...new Set(cases.map((c) => c.category))];

let canary: Canary;
let pub: RedirectServer;
let egress: EgressMonitor;
let h: HostileApp;
let user: TestAccount;
let analyzer: TestAccount;
let before: Footprint;
let analyzerBefore: Footprint;
/** creditsCharged of every analysis the controls got. */
let charged = 0;
let cacheHits = 0;
const resolver = corpusResolver();
const tally = new Tally();
let requestCounter = 0;
const controlAnalyzeIds: string[] = [];

beforeAll(async () => {
  canary = await startCanary();
  const image = await sharp(photoBytes('Canon_40D.jpg')).resize(64).png().toBuffer();
  pub = await startRedirectServer({ port: canary.port, image });
  egress = monitorEgress();
  h = await startHostileApp({
    fetchPolicy: { allowAddress: (ip) => ip === '127.0.0.2' || isPublicAddress(ip), lookup: resolver, timeoutMs: 4_000, connectTimeoutMs: 1_000 },
  });
  user = await createTestAccount(h.db, { community: 100, purchased: 50 });
  analyzer = await createTestAccount(h.db, { community: 10_000 });
  before = await footprint(h.db, user.userId);
  analyzerBefore = await footprint(h.db, analyzer.userId);
}, 60_000);

afterAll(async () => {
  egress?.stop();
  await h?.close();
  await pub?.close();
  await canary?.close();
  if (hostileScale() === 'full') console.log(tally.format(`SSRF corpus (${hostileScale()}): ${cases.length} URLs × ${SLOTS.length} endpoints`));
});

function expand(template: string, rid: string): string {
  return template.replaceAll('{PUB}', pub.origin).replaceAll('{P}', String(canary.port)).replaceAll('{RID}', rid);
}

function urlOf(c: SsrfCase, rid: string): string {
  const target = expand(c.url, rid);
  if (!c.redirect) return target;
  return `${pub.origin}/r/${c.redirect.status}/${c.redirect.hops ?? 1}?to=${encodeURIComponent(target)}`;
}

async function send(slot: Slot, imageUrl: string, requestId: string): Promise<Answer> {
  const started = performance.now();
  const res = await h.app.inject({
    method: 'POST',
    url: slot.url,
    headers: { authorization: `Bearer ${slot.key === 'test' ? user.testKey : slot.key === 'analyze' ? analyzer.liveKey : user.liveKey}`, 'x-request-id': requestId },
    payload: slot.body(imageUrl),
  });
  return { status: res.statusCode, body: res.body, headers: res.headers, ms: performance.now() - started };
}

/** Problems with one answer; empty when it is exactly what the case expects. */
function check(c: SsrfCase, slot: Slot, a: Answer): string[] {
  const problems: string[] = [];
  const want = c.expect === 200 ? slot.accepted : { status: c.expect, code: CODE_OF[c.expect] };
  if (a.status !== want.status) problems.push(`status ${a.status}, expected ${want.status}: ${a.body.slice(0, 160)}`);
  if (a.status >= 400) {
    const e = envelopeOf(a);
    if ('problem' in e) return [...problems, e.problem];
    if (want.code && e.envelope.code !== want.code) problems.push(`code ${e.envelope.code}, expected ${want.code}`);
    if (c.category === 'DNS names resolving private' && LEAKED_ADDRESS.test(e.envelope.message)) problems.push(`message names the address: ${e.envelope.message}`);
  }
  return problems;
}

describe(`SSRF corpus (${hostileScale()} size: ${cases.length} of ${SSRF_CORPUS.length} URLs, every category)`, () => {
  it('covers every category and, at full size, at least 200 attack URLs', () => {
    expect(categories.sort()).toEqual([...new Set(SSRF_CORPUS.map((c) => c.category))].sort());
    const attacks = SSRF_CORPUS.filter((c) => c.expect !== 200).length;
    expect(attacks).toBeGreaterThanOrEqual(200);
    if (hostileScale() === 'full') expect(cases.length).toBe(SSRF_CORPUS.length);
  });

  it.each(categories)('%s: every endpoint answers as expected, nothing connects', async (category: SsrfCategory) => {
    const inCategory = cases.filter((c) => c.category === category);
    const canaryBefore = canary.connections();
    const egressBefore = egress.attempts.length;
    const failures: string[] = [];
    await inPool(inCategory, 6, async (c) => {
      tally.addCase(category);
      for (const slot of SLOTS) {
        const requestId = `ssrf-${++requestCounter}`;
        const url = urlOf(c, requestId.replace('ssrf-', 'r'));
        const a = await send(slot, url, requestId);
        tally.add(category, a, { accepted: c.expect === 200 && a.status === slot.accepted.status });
        if (c.expect === 200 && slot.url === '/v1/analyze' && a.status === 200) {
          const usage = (JSON.parse(a.body) as { usage: { creditsCharged?: number }; meta: { cacheHit?: boolean } });
          charged += usage.usage.creditsCharged ?? 0;
          if (usage.meta.cacheHit) cacheHits += 1;
          else controlAnalyzeIds.push(requestId);
        }
        for (const p of check(c, slot, a)) failures.push(`${slot.name} ${JSON.stringify(url)}: ${p}`);
      }
    });
    const connections = canary.connections() - canaryBefore;
    tally.row(category).canary = connections;
    const allowed = [{ address: '127.0.0.2', port: canary.port }, endpointOf(h.config.DATABASE_URL, 5432), endpointOf(h.config.REDIS_URL, 6379), ...pipelineEndpoints(h)];
    const leaks = egress.attempts.slice(egressBefore).filter((x) => !allowed.some((ok) => ok.address === x.address && ok.port === x.port));
    expect({ failures, connections, leaks }).toEqual({ failures: [], connections: 0, leaks: [] });
  }, 120_000);

  it('only the controls reached the analysis pipeline and were billed; nothing else was billed or stored', async () => {
    const controls = cases.filter((c) => c.expect === 200).length * 2;
    // Every control analysed (the same small image each time: the first runs a workflow, later ones may be cache hits).
    expect(controlAnalyzeIds.length + cacheHits).toBe(controls);
    expect(controlAnalyzeIds.length).toBeGreaterThan(0);
    const ran = await analyzeWorkflowRequestIds(h.pipeline.temporal, interactiveTaskQueue(h.config), controlAnalyzeIds.length);
    expect(ran.sort()).toEqual([...controlAnalyzeIds].sort());
    // The controls' user paid what its analyses said, per the delta, and holds nothing reserved.
    const after = await footprint(h.db, analyzer.userId);
    expect(charged).toBeGreaterThan(0);
    expect(analyzerBefore.balance.community + analyzerBefore.balance.purchased - (after.balance.community + after.balance.purchased)).toBe(charged);
    expect(after.photos).toBe(1);
    expect(await books(h.db, analyzer.userId)).toEqual({ reserved: 0, problems: [] });
    // The other endpoints' user: nothing moved.
    expect(await footprint(h.db, user.userId)).toEqual(before);
    expect(await books(h.db, user.userId)).toEqual({ reserved: 0, problems: [] });
    expect(canary.connections()).toBe(0);
  });

  it('resolves each rebinding name once per fetch: the second answer (the canary) is never used', () => {
    const rebinds = resolver.calls.filter((n) => n.startsWith('rebind-'));
    expect(rebinds.length).toBeGreaterThan(0);
    expect(new Set(rebinds).size).toBe(rebinds.length);
  });
});
