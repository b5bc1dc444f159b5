import { createHash } from 'node:crypto';
import { request as httpRequest, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import ExcelJS from 'exceljs';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Lenstack, LenstackError, photoOutput, type Batch } from '@lenstack/client';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { getBalance } from '../../credits/ledger.ts';
import { RateLimiter } from '../../ratelimit/limiter.ts';
import { testConfig } from '../harness/env.ts';
import { createTestAccount, type TestAccount } from '../helpers/app.ts';
import { photoBase64, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { LOADED_MACHINE_REDIS_MS } from '../helpers/deps.ts';

/**
 * @lenstack/client against the real stack over HTTP: the API listening on a port, a real worker,
 * Temporal, Postgres, Redis, the vendors simulated at the wire. One test per operation group;
 * together they call every operation of openapi/lenstack.json (test/clients/generated.test.ts
 * checks the client wraps all of them).
 */
let p: Pipeline;
let baseUrl: string;
let user: TestAccount;
let client: Lenstack;
let limiter: RateLimiter;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  // The real rate limiter in Redis, as in production (the pipeline helper leaves it out).
  limiter = await RateLimiter.connect(testConfig().REDIS_URL, { commandTimeoutMs: LOADED_MACHINE_REDIS_MS });
  p = await startPipeline({ deps: { rateLimiter: limiter } });
  baseUrl = await p.app.listen({ port: 0, host: '127.0.0.1' });
  user = await createTestAccount(p.db, { community: 200 });
  client = new Lenstack({ apiKey: user.liveKey, baseUrl });
}, 120_000);
afterAll(async () => {
  await p?.close();
  await limiter?.close();
});

describe('@lenstack/client against the running stack', () => {
  it('reads health, llms.txt (with the client install hint), discovery, the catalog and the balance', async () => {
    const anonymous = new Lenstack({ baseUrl });
    expect(await anonymous.health()).toMatchObject({ status: 'ok', version: 'v1' });
    const llms = await anonymous.llmsTxt();
    expect(llms).toContain('@lenstack/client');
    expect(llms).toContain('npx lenstack');
    expect((await anonymous.discovery()).operations).toMatchObject({ analyze: { method: 'POST', path: '/v1/analyze' } });

    const catalog = await client.catalog();
    expect(catalog.modules.find((m) => m.name === 'dating')).toMatchObject({ billable: true, outputFields: ['estimatedDate', 'dateAnchors', 'season', 'holiday'] });
    expect(catalog.presets.find((s) => s.name === 'full-analysis')!.modules).toContain('dating');

    const fresh = await createTestAccount(p.db, { community: 7, purchased: 30 });
    expect(await new Lenstack({ apiKey: fresh.liveKey, baseUrl }).usage()).toEqual({
      tier: 'starter', community: { balance: 7, monthlyAllowance: 0, resetsInDays: 0 }, purchased: { balance: 30 }, reserved: 0,
    });
  });

  it('analyzes with typed lens output, bills a repeated x-request-id once, and serves the lens free the next time', async () => {
    const u = await createTestAccount(p.db, { community: 20 });
    const c = new Lenstack({ apiKey: u.liveKey, baseUrl });
    const body = { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating' as const], options: { includeFingerprint: true } };
    const first = await c.analyze(body, { requestId: `client-${u.userId}` });
    expect(first).toMatchObject({ object: 'analysis', outputSchema: 'photo', usage: { creditsCharged: 1 }, meta: { requestId: `client-${u.userId}`, ai_generated: true } });
    expect(first.fingerprint!.sha256).toBe(sha256(photoBytes('Canon_40D.jpg')));
    const dating = photoOutput(first).estimatedDate!;
    expect(typeof dating.year).toBe('number');
    expect(dating.confidence).toBeGreaterThanOrEqual(0);
    expect(dating.confidence).toBeLessThanOrEqual(1);
    expect(['day', 'month', 'year', 'decade', 'era']).toContain(dating.precision);

    // The same id again is the same request: the stored answer, not a second run or charge.
    const again = await c.analyze(body, { requestId: `client-${u.userId}` });
    expect(again.id).toBe(first.id);
    expect(await getBalance(p.db, u.userId)).toMatchObject({ community: 19, reserved: 0 });

    // A new request for the same lens: from the registry, free, the same output.
    const cached = await c.analyze(body);
    expect(cached.id).not.toBe(first.id);
    expect(cached.meta.cacheHit).toBe(true);
    expect(cached.usage.creditsCharged).toBe(0);
    expect(photoOutput(cached).estimatedDate).toEqual(dating);

    // The registry holds what the analysis answered.
    const byImage = await c.lookup({ images_base64: [photoBase64('Canon_40D.jpg')] });
    const hit = byImage.results[first.fingerprint!.sha256]!;
    expect(hit.matchType).toBe('exact');
    expect(hit.photo!.lenses.dating!.output.estimatedDate).toEqual(dating);
    expect(byImage.meta).toMatchObject({ imagesSubmitted: 1, imagesMatched: 1 });

    const bySha = await c.lookupByFingerprint({ sha256: first.fingerprint!.sha256 });
    expect(bySha.results[first.fingerprint!.sha256]).toMatchObject({ matchType: 'exact', hammingDistance: 0 });
    const byPHash = await c.lookupByFingerprint({ pHash: first.fingerprint!.pHash, threshold: 0 });
    expect(byPHash.results[first.fingerprint!.pHash]).toMatchObject({ matchType: 'fuzzy', hammingDistance: 0, photo: { sha256: first.fingerprint!.sha256 } });
    const unknown = await c.lookupByFingerprint({ sha256: 'f'.repeat(64) });
    expect(unknown.results['f'.repeat(64)]).toEqual({ matchType: 'none' });
  });

  it('names photos uploaded by tus-js-client by their uploadId in analyze, lookup and a batch: the typed bodies take them', async () => {
    const account = await createTestAccount(p.db, { community: 20 });
    const typed = new Lenstack({ apiKey: account.liveKey, baseUrl });
    // The README's way: tus-js-client uploads the file, its URL ends in the uploadId.
    const upload = (bytes: Buffer) =>
      new Promise<string>((resolve, reject) => {
        const up = new tus.Upload(bytes, {
          endpoint: `${baseUrl}/v1/uploads`,
          headers: { authorization: `Bearer ${account.liveKey}` },
          onSuccess: () => resolve(up.url!.split('/').pop()!),
          onError: reject,
        });
        up.start();
      });
    const nikon = photoBytes('Nikon_D70.jpg');
    const [first, second] = [await upload(nikon), await upload(photoBytes('Pentax_K10D.jpg'))];
    expect(first).toMatch(/^upl_[0-9a-f]{32}$/);

    const analysis = await typed.analyze({ images: [{ uploadId: first }], modules: ['dating'], options: { includeFingerprint: true } });
    expect(analysis.fingerprint!.sha256).toBe(sha256(nikon));
    expect(analysis.usage.creditsCharged).toBe(1);
    const found = await typed.lookup({ uploadIds: [first] });
    expect(found.results[sha256(nikon)]).toMatchObject({ matchType: 'exact' });
    const batch = await typed.batches.create({ modules: ['dating'], items: [{ uploadId: first, name: 'nikon.jpg' }, { uploadId: second, name: 'pentax.jpg' }] });
    const ended = await typed.batches.wait(batch.id);
    // The Nikon's dating is in the registry already: only the Pentax is billed.
    expect(ended).toMatchObject({ status: 'completed', counts: { total: 2, done: 2, failed: 0 }, creditsCharged: 1 });
    expect((await getBalance(p.db, account.userId)).community).toBe(18);
  });

  it('runs bespoke extraction on /v2/analyze and enriches the analyzed photo', async () => {
    const v2 = await client.analyzeV2({ imageBase64: photoBase64('gps-DSCN0010.jpg'), modules: ['describe'], extract: { prompt: 'the street name and any shop signs' } });
    expect(v2.usage.creditsCharged).toBe(6);
    const out = photoOutput(v2);
    // The document's PhotoOutput does not describe `bespoke` yet (docs/contract.md: v2's extraction lands there).
    expect((v2.output as { bespoke?: unknown }).bespoke).toMatchObject({ schemaId: expect.stringMatching(/^bsk_[0-9a-f]{32}$/), data: expect.any(Object) });
    expect(typeof out.title).toBe('string');

    const enriched = await client.enrich({ imageBase64: photoBase64('gps-DSCN0010.jpg'), formats: ['xmp', 'iptc'] });
    expect(enriched).toMatchObject({ object: 'enrichment', sha256: sha256(photoBytes('gps-DSCN0010.jpg')), meta: { creditsCharged: 5, ai_generated: true } });
    expect([...enriched.formatsWritten].sort()).toEqual(['iptc', 'xmp']);
    expect(Object.keys(enriched.lensVersions)).toContain('describe');
    const bytes = Buffer.from(enriched.imageBase64, 'base64');
    expect(bytes.subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    expect(bytes.includes(Buffer.from(out.title!))).toBe(true);
  });

  it('runs a batch: create, events to the end, get, items, export, and a typed refusal to retry a photo never stored', async () => {
    const u = await createTestAccount(p.db, { community: 20 });
    const c = new Lenstack({ apiKey: u.liveKey, baseUrl });
    const created = await c.batches.create({
      modules: ['dating'],
      items: [
        { base64: photoBase64('Nikon_D70.jpg'), name: 'nikon.jpg' },
        { base64: photoBase64('Pentax_K10D.jpg'), name: 'pentax.jpg' },
        { base64: Buffer.from('not a photo').toString('base64'), name: 'broken.jpg' },
      ],
    });
    expect(created).toMatchObject({ object: 'batch', id: expect.stringMatching(/^bat_/), status: 'running', counts: { total: 3 } });

    const seen: Batch[] = [];
    for await (const b of c.batches.events(created.id)) seen.push(b);
    expect(seen.at(-1)).toMatchObject({ id: created.id, status: 'completed', counts: { total: 3, done: 2, failed: 1, pending: 0 }, creditsCharged: 2 });
    expect(await c.batches.get(created.id)).toMatchObject({ status: 'completed', creditsCharged: 2 });

    const page = await c.batches.items(created.id, { limit: 2 });
    expect(page.items.map((i) => [i.index, i.source, i.status])).toEqual([[0, 'nikon.jpg', 'done'], [1, 'pentax.jpg', 'done']]);
    expect(page.nextAfter).toBe(1);
    const all = [];
    for await (const item of c.batches.allItems(created.id, { pageSize: 1 })) all.push(item);
    expect(all.map((i) => i.status)).toEqual(['done', 'done', 'failed']);
    expect(all[2]!.error!.code).toBe('IMAGE_INVALID');
    expect((all[0]!.output as { estimatedDate?: { year: number | null } }).estimatedDate).toHaveProperty('year');

    const xlsx = await c.batches.export(created.id, 'xlsx');
    const book = new ExcelJS.Workbook();
    await book.xlsx.load(Buffer.from(xlsx) as never);
    const sheet = book.worksheets[0]!;
    expect((sheet.getRow(1).values as unknown[]).slice(1, 6)).toEqual(['#', 'Source', 'Status', 'SHA-256', 'Error']);
    expect(sheet.getRow(2).getCell(2).value).toBe('nikon.jpg');
    expect(sheet.getRow(2).getCell(4).value).toBe(sha256(photoBytes('Nikon_D70.jpg')));
    const csv = Buffer.from(await c.batches.export(created.id, 'csv')).toString('utf8');
    expect(csv.split('\r\n')[3]).toMatch(/^"3","broken\.jpg","failed",/);

    const refused = await c.batches.retryItem(created.id, 2).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LenstackError);
    expect(refused).toMatchObject({ code: 'ITEM_NOT_RETRYABLE', status: 409, retryable: false });
  });

  it('pauses, resumes and cancels a batch, retries a failed photo, and refuses to steer a finished one', async () => {
    const u = await createTestAccount(p.db, { community: 50 });
    const c = new Lenstack({ apiKey: u.liveKey, baseUrl });
    const photos = ['Canon_40D.jpg', 'Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0010.jpg', 'gps-DSCN0012.jpg', 'gps-DSCN0021.jpg', 'mobile-jolla.jpg', 'hdr-canon_hdr_NO.jpg'];
    // Slow vendors, so the batch is still running when the signals arrive.
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { latencyMs: 400 });
    const status = (id: string) => c.batches.get(id).then((b) => `${b.status}/${b.pauseReason}`);
    let id: string;
    try {
      id = (await c.batches.create({ modules: ['dating'], items: photos.map((f) => ({ base64: photoBase64(f), name: f })) })).id;
      expect((await c.batches.pause(id)).id).toBe(id);
      await expect.poll(() => status(id), { timeout: 60_000, interval: 200 }).toBe('paused/requested');
      const resumed = await c.batches.resume(id);
      expect(resumed.id).toBe(id);
      await expect.poll(() => status(id), { timeout: 60_000, interval: 200 }).toMatch(/^(running\/null|completed\/null)$/);
      await c.batches.cancel(id);
      await expect.poll(() => status(id), { timeout: 60_000, interval: 200 }).toBe('cancelled/null');
    } finally {
      p.sim.reset();
    }
    const cancelled = await c.batches.get(id);
    expect(cancelled.creditsCharged).toBe(cancelled.counts.done);
    const finished = await c.batches.pause(id).catch((e: unknown) => e);
    expect(finished).toMatchObject({ code: 'BATCH_FINISHED', status: 409 });

    // A photo every vendor refused runs again on retry.
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http400' });
    let failedId: string;
    try {
      failedId = (await c.batches.create({ modules: ['dating'], items: [{ base64: photoBase64('orientation-landscape_1.jpg') }] })).id;
      expect((await c.batches.wait(failedId)).counts).toMatchObject({ done: 0, failed: 1 });
    } finally {
      p.sim.reset();
    }
    expect(await c.batches.retryItem(failedId, 0)).toMatchObject({ status: 'running', counts: { pending: 1, failed: 0 } });
    const progress: Batch[] = [];
    const done = await c.batches.wait(failedId, { onProgress: (b) => progress.push(b) });
    expect(done).toMatchObject({ status: 'completed', counts: { done: 1, failed: 0 }, creditsCharged: 1 });
    expect(progress.at(-1)!.status).toBe('completed');
  });

  it('throws typed errors: bad key, unknown lens, not enough credits, photo not in the registry, unknown batch', async () => {
    const badKey = await new Lenstack({ apiKey: 'svc_live_thisisnotakey000000000000000000000', baseUrl }).usage().catch((e: unknown) => e);
    expect(badKey).toBeInstanceOf(LenstackError);
    expect(badKey).toMatchObject({ code: 'AUTH_FAILED', status: 401, retryable: false, requestId: expect.any(String) });

    const unknownLens = await client.analyze({ imageBase64: photoBase64('Canon_40D.jpg'), modules: ['palmistry' as never] }).catch((e: unknown) => e);
    expect(unknownLens).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect((unknownLens as Error).message).toContain('palmistry');

    const poor = await createTestAccount(p.db, { community: 2 });
    const broke = await new Lenstack({ apiKey: poor.liveKey, baseUrl }).analyze({ imageBase64: photoBase64('Canon_40D.jpg'), preset: 'full-analysis' }, { requestId: 'poor-1' }).catch((e: unknown) => e);
    expect(broke).toMatchObject({ code: 'PLAN_LIMIT_EXCEEDED', status: 402, requestId: 'poor-1', credits: { needed: 14, community: 2, purchased: 0, total: 2 } });

    const notAnalyzed = await client.enrich({ imageBase64: photoBase64('xmp-BlueSquare.jpg'), formats: ['xmp'] }).catch((e: unknown) => e);
    expect(notAnalyzed).toMatchObject({ code: 'PHOTO_NOT_IN_REGISTRY', status: 404 });

    const noBatch = await client.batches.get('bat_doesnotexist').catch((e: unknown) => e);
    expect(noBatch).toMatchObject({ code: 'NOT_FOUND', status: 404 });
  });

  it('hands back a real 429 whose Retry-After is longer than it may wait: RATE_LIMITED with the wait, sent once', async () => {
    // The anonymous sandbox key: 2 requests a minute per IP.
    const anonymous = new Lenstack({ apiKey: ANONYMOUS_SANDBOX_KEY, baseUrl, retry: { maxRetryAfterMs: 1000 } });
    await anonymous.catalog();
    await anonymous.catalog();
    const limited = await anonymous.catalog({ requestId: 'anon-third' }).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(LenstackError);
    expect(limited).toMatchObject({ code: 'RATE_LIMITED', status: 429, retryable: true, attempts: 1, requestId: 'anon-third' });
    expect((limited as LenstackError).retryAfterSeconds).toBeGreaterThan(1);
    expect((limited as LenstackError).retryAfterSeconds).toBeLessThanOrEqual(60);
  });

  it('resends an analysis whose answer was lost on the way with the same x-request-id: one run, one charge, the first answer', async () => {
    const u = await createTestAccount(p.db, { community: 10 });
    // A proxy that lets the first request reach the API, reads its answer, then hangs up on the client.
    const firstAnswers: string[] = [];
    const ids: string[] = [];
    const api = new URL(baseUrl);
    const proxy: Server = createServer((req, res) => {
      ids.push(String(req.headers['x-request-id']));
      const upstream = httpRequest({ host: api.hostname, port: api.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          if (ids.length === 1) {
            firstAnswers.push(Buffer.concat(chunks).toString('utf8'));
            req.socket.destroy();
            return;
          }
          res.writeHead(answer.statusCode!, answer.headers);
          res.end(Buffer.concat(chunks));
        });
      });
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const c = new Lenstack({ apiKey: u.liveKey, baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, retry: { baseDelayMs: 1 } });
      const analysis = await c.analyze({ imageBase64: photoBase64('gps-DSCN0021.jpg'), modules: ['dating', 'describe'] });
      expect(ids).toHaveLength(2);
      expect(ids[1]).toBe(ids[0]);
      expect(analysis.id).toBe(JSON.parse(firstAnswers[0]!).id);
      expect(analysis.usage.creditsCharged).toBe(2);
      expect(await getBalance(p.db, u.userId)).toMatchObject({ community: 8, reserved: 0 });
    } finally {
      await new Promise((r) => proxy.close(r));
    }
  });
});
