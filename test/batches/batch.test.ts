import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_CONCURRENCY } from '../../batches/submit.ts';
import { checkInvariants, getBalance, grant } from '../../credits/ledger.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { DISTINCT_PHOTOS, photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Batches through HTTP against the real pipeline: the batch workflow runs each photo through the
 * analyze saga as a child workflow on a real worker, vendors simulated at the wire.
 */
let p: Pipeline;
beforeAll(async () => {
  // startPipeline starts the one worker (and stops it in close()); a second one started here was
  // never stopped.
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());

const PHOTOS = DISTINCT_PHOTOS;
const submit = (key: string, body: Record<string, unknown>) => p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(key), payload: body });
const status = async (key: string, id: string) => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(key) })).json();
const until = (key: string, id: string, want: (b: { status: string; pauseReason: string | null }) => boolean) =>
  expect.poll(async () => want(await status(key, id)), { timeout: 90_000, interval: 200 }).toBe(true);

describe('a batch over the API', () => {
  it('runs every photo once, bills each distinct photo once, fails a broken one with its reason, and exports what the caller chose', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const items = [
      ...PHOTOS.map((f) => ({ base64: photoBase64(f), name: f })),
      { base64: photoBase64('Canon_40D.jpg'), name: '=copy of Canon_40D.jpg' },
      { base64: Buffer.from('these bytes are not a photo of anything').toString('base64'), name: 'broken.jpg' },
    ];
    const columns = [
      { label: 'Year', jsonPath: 'output.estimatedDate.year', format: 'number' },
      { label: 'Confidence', jsonPath: 'output.estimatedDate.confidence', format: 'percentage' },
    ];
    const res = await submit(user.liveKey, { items, modules: ['dating'], columns });
    expect(res.statusCode, res.body).toBe(202);
    const batch = res.json();
    expect(batch).toMatchObject({ object: 'batch', id: expect.stringMatching(/^bat_/), counts: { total: 12 }, lenses: ['moderation', 'dating'] });

    await until(user.liveKey, batch.id, (b) => b.status === 'completed');
    const done = await status(user.liveKey, batch.id);
    expect(done.counts).toEqual({ total: 12, done: 11, failed: 1, pending: 0 });
    // Ten distinct photos, one dating credit each; the copy of a photo is not billed again.
    expect(done.creditsCharged).toBe(10);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 90, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);

    // Findable in Temporal by the batch's search attribute.
    const found = async () => {
      const out: string[] = [];
      for await (const w of p.temporal.workflow.list({ query: `LenstackBatchId = '${batch.id}'` })) out.push(w.workflowId);
      return out;
    };
    await expect.poll(found, { timeout: 30_000, interval: 200 }).toEqual([`batch:${user.userId}:${batch.id}`]);

    // Results page by page, in submission order.
    const page = (await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/items?limit=5`, headers: bearer(user.liveKey) })).json();
    expect(page.items.map((i: { index: number }) => i.index)).toEqual([0, 1, 2, 3, 4]);
    expect(page.nextAfter).toBe(4);
    expect(page.items[0]).toMatchObject({ source: 'Canon_40D.jpg', status: 'done', output: { estimatedDate: expect.any(Object) } });
    const last = (await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/items?after=9`, headers: bearer(user.liveKey) })).json();
    expect(last.items.map((i: { index: number; status: string }) => [i.index, i.status])).toEqual([[10, 'done'], [11, 'failed']]);
    expect(last.items[1].error.code).toBe('IMAGE_INVALID');
    expect(last.nextAfter).toBeNull();

    // csv and xlsx, read back: the chosen columns after the identity ones, formulas neutralised.
    const csv = await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/export?format=csv`, headers: bearer(user.liveKey) });
    expect(csv.statusCode).toBe(200);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    const records = parse(csv.rawPayload, { bom: true }) as string[][];
    expect(records[0]).toEqual(['#', 'Source', 'Status', 'SHA-256', 'Error', 'Year', 'Confidence']);
    expect(records).toHaveLength(13);
    expect(records[11]!.slice(0, 3)).toEqual(['11', "'=copy of Canon_40D.jpg", 'done']);
    expect(records[12]!.slice(0, 3)).toEqual(['12', 'broken.jpg', 'failed']);
    // Each row's Year is that photo's own result.
    const all = (await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/items?limit=100`, headers: bearer(user.liveKey) })).json();
    const years = all.items.map((i: { output: { estimatedDate?: { year?: number | null } } | null }) => String(i.output?.estimatedDate?.year ?? ''));
    expect(records.slice(1).map((r) => r[5])).toEqual(years);
    expect(years.filter((y: string) => y !== '').length).toBeGreaterThan(0);

    const xlsx = await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/export?format=xlsx`, headers: bearer(user.liveKey) });
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.load(xlsx.rawPayload as unknown as ArrayBuffer);
    const sheet = wb.getWorksheet('Photos')!;
    expect(sheet.rowCount).toBe(13);
    const xlsxYears = Array.from({ length: 12 }, (_, k) => sheet.getRow(k + 2).getCell(6).value);
    expect(xlsxYears.map((v) => (v === null ? '' : String(v)))).toEqual(years);
    expect(xlsxYears.filter((v) => v !== null).every((v) => typeof v === 'number')).toBe(true);

    const json = (await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/export?format=json`, headers: bearer(user.liveKey) })).json();
    expect(json).toHaveLength(12);
    expect(json[0].output).not.toHaveProperty('moderation');

    // Another account's key: the batch does not exist for it. An unknown format is a 400.
    const other = await createTestAccount(p.db);
    expect((await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/export?format=csv`, headers: bearer(other.liveKey) })).statusCode).toBe(404);
    expect((await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}`, headers: bearer(other.liveKey) })).statusCode).toBe(404);
    expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${batch.id}/cancel`, headers: bearer(other.liveKey) })).statusCode).toBe(404);
    const bad = await p.app.inject({ method: 'GET', url: `/v1/batches/${batch.id}/export?format=pdf`, headers: bearer(user.liveKey) });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toContain('xlsx, csv, json');
    // A finished batch cannot be paused.
    expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${batch.id}/pause`, headers: bearer(user.liveKey) })).statusCode).toBe(409);
  });

  it('runs out of credits: pauses with that reason, nothing overdrawn; resumes after a purchase and bills each photo once', async () => {
    const user = await createTestAccount(p.db, { community: 3 });
    const res = await submit(user.liveKey, { items: PHOTOS.slice(0, 6).map((f) => ({ base64: photoBase64(f) })), modules: ['dating'] });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await until(user.liveKey, id, (b) => b.status === 'paused' && b.pauseReason === 'credits');
    const paused = await status(user.liveKey, id);
    expect(paused.counts).toMatchObject({ done: 3, pending: 3, failed: 0 });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, reserved: 0 });

    await grant(p.db, { accountId: user.userId, pool: 'purchased', amount: 10, idempotencyKey: `test-purchase-${id}`, kind: 'purchase' });
    expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/resume`, headers: bearer(user.liveKey) })).statusCode).toBe(202);
    await until(user.liveKey, id, (b) => b.status === 'completed');
    const done = await status(user.liveKey, id);
    expect(done.counts).toEqual({ total: 6, done: 6, failed: 0, pending: 0 });
    expect(done.creditsCharged).toBe(6);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, purchased: 7, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
  });

  it('pause holds the pending photos and cancel ends the batch without running them', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    // The vendors hold every call until released: the batch cannot finish a photo before the
    // pause has landed, whatever the machine's speed.
    p.sim.hold();
    try {
      const res = await submit(user.liveKey, { items: PHOTOS.map((f) => ({ base64: photoBase64(f) })), modules: ['dating'] });
      const id = res.json().id;
      // Provably mid-batch: a photo's vendor call is waiting at the vendor, nothing is done yet.
      await expect.poll(() => p.sim.held(), { timeout: 60_000, interval: 20 }).toBeGreaterThan(0);
      expect(await status(user.liveKey, id)).toMatchObject({ status: 'running', counts: { total: PHOTOS.length, done: 0, pending: PHOTOS.length } });
      expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/pause`, headers: bearer(user.liveKey) })).statusCode).toBe(202);
      // The photos already running finish once the vendors answer; no other one starts.
      p.sim.release();
      await until(user.liveKey, id, (b) => b.status === 'paused' && b.pauseReason === 'requested');
      const paused = await status(user.liveKey, id);
      expect(paused.counts.done).toBeGreaterThan(0);
      expect(paused.counts.done).toBeLessThanOrEqual(BATCH_CONCURRENCY);
      expect(paused.counts.pending).toBe(PHOTOS.length - paused.counts.done);
      expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/cancel`, headers: bearer(user.liveKey) })).statusCode).toBe(202);
      await until(user.liveKey, id, (b) => b.status === 'cancelled');
      const cancelled = await status(user.liveKey, id);
      // What never ran fails (BATCH_FINISHED), so its bytes are let go; nothing stays pending.
      expect(cancelled.counts).toMatchObject({ pending: 0, failed: paused.counts.pending, done: paused.counts.done });
      expect(cancelled.creditsCharged).toBe(cancelled.counts.done);
      expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100 - cancelled.counts.done, reserved: 0 });
    } finally {
      p.sim.reset();
    }
  });

  it('a photo every vendor refused fails with the reason and runs again on retry, the completed batch starting again for it', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http400' });
    let id: string;
    try {
      const res = await submit(user.liveKey, { items: [{ base64: photoBase64('Nikon_D70.jpg') }, { base64: Buffer.from('not a photo').toString('base64') }], modules: ['dating'] });
      id = res.json().id;
      await until(user.liveKey, id, (b) => b.status === 'completed');
    } finally {
      p.sim.reset();
    }
    const failed = (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}/items`, headers: bearer(user.liveKey) })).json();
    expect(failed.items.map((i: { status: string; error: { code: string } | null }) => [i.status, i.error?.code])).toEqual([['failed', 'PROVIDER_ERROR'], ['failed', 'IMAGE_INVALID']]);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });

    // The photo intake refused was never stored: it cannot run again.
    const refused = await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/items/1/retry`, headers: bearer(user.liveKey) });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error.code).toBe('ITEM_NOT_RETRYABLE');
    const retried = await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/items/0/retry`, headers: bearer(user.liveKey) });
    expect(retried.statusCode, retried.body).toBe(202);
    expect(retried.json()).toMatchObject({ status: 'running', counts: { pending: 1, failed: 1 } });

    // Followed by server-sent events until it completes.
    const events = await p.app.inject({ method: 'GET', url: `/v1/batches/${id}/events`, headers: bearer(user.liveKey) });
    expect(events.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const sent = events.payload.split('\n\n').filter((e) => e.startsWith('event: batch')).map((e) => JSON.parse(e.split('\ndata: ')[1]!));
    expect(sent.at(-1)).toMatchObject({ status: 'completed', counts: { done: 1, failed: 1, pending: 0 }, creditsCharged: 1, etaSeconds: null });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
    // A done photo does not run again.
    expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/items/0/retry`, headers: bearer(user.liveKey) })).statusCode).toBe(409);
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
  });

  it('one x-request-id is one batch: a resent submission gets the same batch, a different body under the id 409, two at once one batch', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const body = { modules: ['dating'], items: [{ base64: photoBase64('Nikon_D70.jpg'), name: 'a.jpg' }] };
    const send = (b: Record<string, unknown>, id: string) =>
      p.app.inject({ method: 'POST', url: '/v1/batches', headers: { ...bearer(user.liveKey), 'x-request-id': id }, payload: b });
    const first = await send(body, 'submit-once-1');
    expect(first.statusCode, first.body).toBe(202);
    // The answer was lost; the client sends the same request again under the same id.
    const again = await send(body, 'submit-once-1');
    expect(again.statusCode, again.body).toBe(202);
    expect(again.json().id).toBe(first.json().id);
    // Another request under the id is refused and keeps nothing.
    const other = await send({ ...body, modules: ['location'] }, 'submit-once-1');
    expect(other.statusCode).toBe(409);
    expect(other.json().error.code).toBe('REQUEST_ID_CONFLICT');
    // Two identical submissions racing under a fresh id make one batch: the one that finds it
    // still starting is told to send again (503, Retry-After: 1; docs/decisions.md "Batches:
    // starting"), or gets it (202) when its start was already done.
    const pair = await Promise.all([send(body, 'submit-once-2'), send(body, 'submit-once-2')]);
    const r1 = pair.find((r) => r.statusCode === 202)!;
    expect(r1, pair.map((r) => r.body).join('\n')).toBeDefined();
    for (const r of pair.filter((r) => r.statusCode !== 202)) {
      expect(r.statusCode, r.body).toBe(503);
      expect(r.json().error.message).toMatch(/still starting/);
      expect(r.headers['retry-after']).toBe('1');
    }
    const r2 = await send(body, 'submit-once-2');
    expect(r2.statusCode, r2.body).toBe(202);
    expect(r2.json().id).toBe(r1.json().id);
    const rows = await p.db.query('SELECT id FROM batches WHERE user_id = $1', [user.userId]);
    expect(rows.rowCount).toBe(2);
    await until(user.liveKey, first.json().id, (b) => b.status === 'completed');
    await until(user.liveKey, r1.json().id, (b) => b.status === 'completed');
    // The photo was billed once, whatever was resent.
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 99, reserved: 0 });
    expect(await checkInvariants(p.db, user.userId)).toEqual([{ userId: user.userId, ok: true, problems: [] }]);
  });

  it('refuses bad input with a 400 and keeps nothing', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const bodies = [
      { items: [], modules: ['dating'] },
      { items: Array.from({ length: 10_001 }, (_, i) => ({ url: `https://photos.example/${i}.jpg` })), modules: ['dating'] },
      { items: [{ name: 'no image' }], modules: ['dating'] },
      { items: [{ base64: photoBase64('Canon_40D.jpg') }], modules: ['no-such-lens'] },
      { items: [{ base64: photoBase64('Canon_40D.jpg') }], preset: 'vehicle-condition' },
    ];
    for (const body of bodies) {
      const res = await submit(user.liveKey, body);
      expect(res.statusCode, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    const sandbox = await submit(user.testKey, { items: [{ base64: photoBase64('Canon_40D.jpg') }], modules: ['dating'] });
    expect(sandbox.statusCode).toBe(400);
    expect(sandbox.json().error.message).toContain('live key');
    const rows = await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId]);
    expect(rows.rows[0].n).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
  });
});
