import { Client, Connection } from '@temporalio/client';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interactiveTaskQueue, type Config } from '../../core/config.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { startSimVendor } from '../../tools/sim/index.ts';
import { startWorker, type RunningWorker } from '../../worker/main.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount, INTERNAL_SECRET, type TestAccount } from '../helpers/app.ts';
import { quietTemporal, workflowBundle, type Sim } from '../helpers/pipeline.ts';
import * as C from './images/containers.ts';
import { baseImages, buildImageCorpus, type ImageCase, type ImageCategory } from './images/corpus.ts';
import { hostileScale, SEED, sizes } from './sizes.ts';
import { analyzeWorkflowRequestIds, books, footprint, type Footprint } from './support/app.ts';
import { startApiProcess, type ApiProcess } from './support/child-api.ts';
import { inPool } from './support/pool.ts';
import { prng } from './support/prng.ts';
import { envelopeOf, Tally, type Answer } from './support/report.ts';

/**
 * The hostile image corpus (bombs, truncations, mutants, masquerades, the shared photos) sent as
 * base64 to every endpoint that reads an image, against the API running as its own process: no
 * answer may be a 5xx, every refusal is a 4xx envelope (docs/contract.md), the endpoints agree on what
 * is a picture, the process survives with bounded memory, and nothing is billed or stored for a
 * refused image. Behind the API runs the real pipeline: Temporal (the harness's dev server, this
 * file's task queue), a real worker in this process (it decodes and resizes every accepted image
 * for the vendor) and the simulated vendor at 0 ms latency. An accepted image is a real analysis,
 * billed per the delta; the worker must survive the corpus.
 */

/**
 * A request still unanswered after this is reported as "no answer" rather than hanging the run. Not
 * a speed claim (no timed assertions in tests): how fast refusals are is measured by
 * bench/heic-decode.ts (a HEIC damaged deep inside is found only by decoding all of it).
 */
const REQUEST_GIVE_UP_MS = 120_000;
/** Room for a loaded CI machine; an idle 2-core one takes a fraction (docs/reliability.md). */
const HEAVY_TEST_MS = hostileScale() === 'full' ? 20 * 60_000 : 240_000;
/** Peak RSS the API process may reach over the whole corpus (measured peaks: docs/reliability.md). */
const PEAK_RSS_LIMIT_MB = hostileScale() === 'full' ? 6_144 : 2_048;

interface Endpoint {
  name: string;
  /** `analyze`: the live key of a user of its own, so analysed photos never reach enrich's registry lookups. */
  key: 'live' | 'test' | 'analyze';
  path: string;
  body(base64: string): Record<string, unknown>;
  /** The answer of an image that passed intake: how far it gets on this endpoint. */
  accepted(a: Answer): boolean;
}

// Sandbox enrichment really writes the file with exiftool, which refuses some files every
// decoder reads (broken XMP packets, a PNG without IEND): a 422 of its own, after intake.
const WRITE_REFUSED = /"code":"IMAGE_INVALID","message":"Metadata cannot be written to this image/;

// What intake accepted but the worker or the vendor could not handle: a spec 502, never a 500.
// (None at full size with SEED: every image intake accepted was analysed, 375 of them.)
const PIPELINE_REFUSED = /"code":"PROVIDER_(UNAVAILABLE|ERROR)"/;
const pipelineRefused = (a: Answer) => a.status === 502 && PIPELINE_REFUSED.test(a.body);

const ENDPOINTS: Endpoint[] = [
  { name: 'POST /v1/analyze', key: 'analyze', path: '/v1/analyze', body: (b) => ({ imageBase64: b, modules: ['describe'] }), accepted: (a) => a.status === 200 || pipelineRefused(a) },
  { name: 'POST /v2/lookup', key: 'live', path: '/v2/lookup', body: (b) => ({ images_base64: [b] }), accepted: (a) => a.status === 200 },
  { name: 'POST /v2/enrich (live)', key: 'live', path: '/v2/enrich', body: (b) => ({ imageBase64: b, formats: ['xmp'] }), accepted: (a) => a.status === 404 && a.body.includes('PHOTO_NOT_IN_REGISTRY') },
  { name: 'POST /v2/enrich (sandbox)', key: 'test', path: '/v2/enrich', body: (b) => ({ imageBase64: b, formats: ['xmp'] }), accepted: (a) => a.status === 200 || (a.status === 422 && WRITE_REFUSED.test(a.body)) },
];

const scale = hostileScale();
/** Every category: the corpus must have each, and each gets its own test. */
const CATEGORIES = [
  'bombs over the pixel cap',
  'bombs under the pixel cap',
  'nested and recursive structures',
  'truncated files',
  'shared invalid-* photos (intact)',
  'shared photos',
  'byte mutants of the shared photos',
  'empty and tiny',
  'masquerading files',
] satisfies ImageCategory[];
const MUTANTS: ImageCategory = 'byte mutants of the shared photos';
let corpus: ImageCase[] = [];
/** Cases not sent to analyze (a seeded share of the mutants at CI size: sizes.ts analyzeMutantShare). */
const notAnalyzed = new Set<ImageCase>();
let categories: ImageCategory[] = [];
let config: Config;
let db: Db;
let api: ApiProcess;
let sim: Sim;
let worker: RunningWorker;
let connection: Connection;
let temporal: Client;
let user: TestAccount;
let analyzer: TestAccount;
let before: Footprint;
let analyzerBefore: Footprint;
const tally = new Tally();
/** Analyze requests that started a workflow (accepted and not answered from the registry). */
const workflowAnalyzeIds: string[] = [];
/** Every analyze answer by request id: a refusal may come from the worker's decode, after a workflow started. */
const analyzeAnswers = new Map<string, Answer>();
const analyzed = { ok: 0, cacheHits: 0, refused: 0, charged: 0 };
let requestCounter = 0;

beforeAll(async () => {
  quietTemporal();
  sim = await startSimVendor({ port: 0 });
  config = testConfig({ INTERNAL_SECRET, SIM_VENDOR_URL: sim.url });
  db = createPool(config.DATABASE_URL, { max: 2 });
  user = await createTestAccount(db, { community: 1_000 });
  analyzer = await createTestAccount(db, { community: 1_000_000 });
  before = await footprint(db, user.userId);
  analyzerBefore = await footprint(db, analyzer.userId);
  // The worker reads the blobs the API child stores: same BLOB_DIR, same task queue (config).
  worker = await startWorker(config, { workflowBundle: await workflowBundle(), log: () => {} });
  connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS! });
  temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const s = sizes();
  corpus = await buildImageCorpus({ mutants: s.imageMutants, truncationsPerFormat: s.truncationsPerFormat, heavyBombs: scale === 'full' }, prng(SEED).fork('images'));
  categories = [...new Set(corpus.map((c) => c.category))];
  const draw = prng(SEED).fork('analyze-mutants');
  for (const c of corpus) if (c.category === MUTANTS && !draw.chance(s.analyzeMutantShare)) notAnalyzed.add(c);
  api = await startApiProcess(config);
}, 120_000);

afterAll(async () => {
  await api?.stop();
  await worker?.shutdown().catch(() => {});
  await connection?.close();
  await sim?.close();
  await db?.end();
  if (scale === 'full') console.log(tally.format(`Image corpus (${scale}): ${corpus.length} files × ${ENDPOINTS.length} endpoints, API in its own process, real pipeline`));
  console.log(`image corpus: analyze ${analyzed.ok} answered 200 (${analyzed.cacheHits} from the registry), ${analyzed.refused} answered 502 by the pipeline, ${analyzed.charged} credits charged`);
});

async function send(e: Endpoint, base64: string, requestId: string, timeoutMs = REQUEST_GIVE_UP_MS): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${api.url}${e.path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${e.key === 'test' ? user.testKey : e.key === 'analyze' ? analyzer.liveKey : user.liveKey}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify(e.body(base64)),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = await res.text();
  return { status: res.status, body, headers: Object.fromEntries(res.headers), ms: performance.now() - started };
}

/** Peak RSS of the API process while `work` runs, sampled every 25 ms (and the high-water mark). */
async function watchingMemory<T>(work: () => Promise<T>): Promise<{ result: T; peakMb: number }> {
  let peak = (await api.memory()).rss;
  let sampling = true;
  const sampler = (async () => {
    while (sampling && !api.exited()) {
      peak = Math.max(peak, (await api.memory()).rss);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  try {
    const result = await work();
    return { result, peakMb: peak / 2 ** 20 };
  } finally {
    sampling = false;
    await sampler.catch(() => {});
  }
}

function countAnalysis(requestId: string, a: Answer): void {
  if (a.status !== 200) {
    analyzed.refused += 1;
    workflowAnalyzeIds.push(requestId);
    return;
  }
  const body = JSON.parse(a.body) as { usage: { creditsCharged?: number }; meta: { cacheHit?: boolean } };
  analyzed.ok += 1;
  analyzed.charged += body.usage.creditsCharged ?? 0;
  if (body.meta.cacheHit) analyzed.cacheHits += 1;
  else workflowAnalyzeIds.push(requestId);
}

function judge(c: ImageCase, answers: Array<[Endpoint, Answer]>): string[] {
  const problems: string[] = [];
  const verdicts = answers.map(([e, a]) => (e.accepted(a) ? 'accept' : a.status >= 400 && a.status < 500 ? 'reject' : `HTTP ${a.status}`));
  answers.forEach(([e, a], i) => {
    const where = `${e.name}: ${c.name}`;
    if (a.status >= 400) {
      const env = envelopeOf(a);
      if ('problem' in env) problems.push(`${where}: ${env.problem}`);
      else if (a.status >= 500 && !e.accepted(a)) problems.push(`${where}: ${a.status} ${env.envelope.code} ${env.envelope.message}`);
    }
    const v = verdicts[i]!;
    if (c.expect !== 'either' && v !== c.expect) problems.push(`${where}: expected ${c.expect}, got ${v} (${a.status} ${a.body.slice(0, 160)})`);
    if (v === 'reject') {
      if (c.status && a.status !== c.status) problems.push(`${where}: status ${a.status}, expected ${c.status}`);
      const env = envelopeOf(a);
      if (c.code && 'envelope' in env && env.envelope.code !== c.code) problems.push(`${where}: code ${env.envelope.code}, expected ${c.code}`);
      // A refusal of the image is final, never "try again": a retryable 4xx would have clients resend it.
      if (a.status === 422 && 'envelope' in env && env.envelope.retryable !== false) problems.push(`${where}: 422 marked retryable`);
    }
  });
  if (c.expect === 'either' && new Set(verdicts).size > 1) {
    problems.push(`endpoints disagree on ${c.name}: ${answers.map(([e, a], i) => `${e.name} ${verdicts[i]} (${a.status} ${a.body.slice(0, 120)})`).join(' | ')}`);
  }
  return problems;
}

describe(`image corpus (${scale} size), API in its own process`, () => {
  it('has every category, and at full size hundreds of mutants', () => {
    expect([...categories].sort()).toEqual([...CATEGORIES].sort());
    expect(corpus.filter((c) => c.category === 'byte mutants of the shared photos').length).toBe(sizes().imageMutants);
    const analyzedMutants = corpus.filter((c) => c.category === MUTANTS && !notAnalyzed.has(c)).length;
    expect(analyzedMutants).toBeGreaterThanOrEqual(Math.floor(sizes().imageMutants * sizes().analyzeMutantShare * 0.6));
  });

  it.each(CATEGORIES)('%s: 4xx envelopes for every bad file, no 5xx, endpoints agree', async (category) => {
    const cases = corpus.filter((c) => c.category === category);
    const failures: string[] = [];
    const { peakMb } = await watchingMemory(() =>
      inPool(cases, 2, async (c) => {
        tally.addCase(category);
        const answers = await Promise.all(
          ENDPOINTS.filter((e) => e.path !== '/v1/analyze' || !notAnalyzed.has(c)).map(async (e): Promise<[Endpoint, Answer]> => {
            const requestId = `img-${++requestCounter}`;
            const a = await send(e, c.base64, requestId).catch((err: Error): Answer => ({ status: 0, body: `no answer: ${err.message}`, headers: {}, ms: 0 }));
            if (e.path === '/v1/analyze') analyzeAnswers.set(requestId, a);
            if (e.path === '/v1/analyze' && e.accepted(a)) countAnalysis(requestId, a);
            tally.add(category, a, { accepted: e.accepted(a) });
            return [e, a];
          }),
        );
        failures.push(...judge(c, answers));
      }),
    );
    tally.row(category).peakRssMb = peakMb;
    expect({ failures, exited: api.exited() }).toEqual({ failures: [], exited: null });
  }, HEAVY_TEST_MS);

  it('concurrent decode bombs: refused from their header, memory does not grow with the requests', async () => {
    // The worst bomb of the corpus, 8 at once then 24 at once: each is refused before any decode
    // (over MAX_PIXELS_PER_BYTE), so the two peaks match.
    const base = await baseImages();
    const bomb = (scale === 'full' ? C.jpegWithDimensions(base.progressiveCmyk, 10_000, 10_000) : C.jpegWithDimensions(base.progressiveGrey, 4_000, 4_000)).toString('base64');
    const lookup = ENDPOINTS.find((e) => e.path === '/v2/lookup')!;
    const row = tally.row('8, then 24 concurrent worst bombs (lookup)');
    const run = async (n: number) => {
      // Queued requests wait for the 4 decoder threads: minutes on a busy 2-core machine.
      const { result, peakMb } = await watchingMemory(() => Promise.all(Array.from({ length: n }, () => send(lookup, bomb, `img-${++requestCounter}`, HEAVY_TEST_MS))));
      row.cases += n;
      for (const a of result) tally.add(row.category, a);
      expect(result.map((a) => a.status)).toEqual(Array(n).fill(422));
      return { peakMb, slowestMs: Math.max(...result.map((a) => a.ms)) };
    };
    const eight = await run(8);
    const many = await run(24);
    row.peakRssMb = Math.max(eight.peakMb, many.peakMb);
    console.log(
      `image corpus: ${scale === 'full' ? 'CMYK 10000²' : 'greyscale 4000²'} progressive JPEG bombs: 8 at once peak ${eight.peakMb.toFixed(0)} MB ` +
        `(slowest ${eight.slowestMs.toFixed(0)} ms); 24 at once peak ${many.peakMb.toFixed(0)} MB (slowest ${many.slowestMs.toFixed(0)} ms)`,
    );
    // Unbounded, 24 would hold three times what 8 hold.
    expect(many.peakMb).toBeLessThan(1.5 * eight.peakMb);
    expect(many.peakMb).toBeLessThan(PEAK_RSS_LIMIT_MB);
  }, HEAVY_TEST_MS);

  it('the API process survived with bounded memory, and still answers', async () => {
    const { maxRss } = await api.memory();
    const peakMb = maxRss / 2 ** 20;
    console.log(`image corpus: API process peak RSS ${peakMb.toFixed(0)} MB (high-water mark)`);
    expect(peakMb).toBeLessThan(PEAK_RSS_LIMIT_MB);
    const health = await fetch(`${api.url}/v1/health`);
    expect(health.status).toBe(200);
    expect(api.exited()).toBeNull();
  });

  it('the worker survived the corpus: still running, and a normal analysis succeeds', async () => {
    expect(worker.worker.getState()).toBe('RUNNING');
    const fresh = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#2a6' } }).png().toBuffer();
    const analyze = ENDPOINTS.find((e) => e.path === '/v1/analyze')!;
    const requestId = `img-${++requestCounter}`;
    const a = await send(analyze, fresh.toString('base64'), requestId);
    expect(a.status, a.body.slice(0, 300)).toBe(200);
    const body = JSON.parse(a.body) as { usage: { creditsCharged?: number }; meta: { cacheHit?: boolean } };
    expect(body.meta.cacheHit).toBe(false);
    expect(body.usage.creditsCharged).toBeGreaterThan(0);
    countAnalysis(requestId, a);
  });

  it('only accepted images reached the analysis pipeline, billed per the delta; nothing else was billed or stored', async () => {
    // Every accepted analyze request that was not a cache hit started a workflow. Refused ones
    // started one only when their header passed and the worker's decode refused the pixels
    // (docs/decisions.md, "Decoding after the reservation"): those were answered 422 IMAGE_INVALID.
    const ran = await analyzeWorkflowRequestIds(temporal, interactiveTaskQueue(config), workflowAnalyzeIds.length);
    expect(ran).toEqual(expect.arrayContaining(workflowAnalyzeIds));
    const refusedAfterStart = ran.filter((id) => !workflowAnalyzeIds.includes(id)).map((id) => {
      const a = analyzeAnswers.get(id);
      return a ? `${a.status} ${(JSON.parse(a.body) as { error?: { code?: string } }).error?.code}` : 'not sent by this test';
    });
    expect(new Set(refusedAfterStart)).toEqual(new Set(refusedAfterStart.length ? ['422 IMAGE_INVALID'] : []));
    // The analyzing user paid what the answers said they charged, and holds nothing reserved.
    const after = await footprint(db, analyzer.userId);
    const spent = analyzerBefore.balance.community + analyzerBefore.balance.purchased - (after.balance.community + after.balance.purchased);
    expect(spent).toBe(analyzed.charged);
    expect(await books(db, analyzer.userId)).toEqual({ reserved: 0, problems: [] });
    // lookup and enrich: nothing moved for their user.
    expect(await footprint(db, user.userId)).toEqual(before);
    expect(await books(db, user.userId)).toEqual({ reserved: 0, problems: [] });
  });
});
