import { createServer, type Server, type Socket } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utimes } from 'node:fs/promises';
import { takeBatchPhoto } from '../../registry/intake.ts';
import { requestFingerprint } from '../../analysis/request-binding.ts';
import { batchWorkflowId } from '../../batches/submit.ts';
import { createBatch } from '../../batches/repository.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { resolveLenses } from '../../lenses/resolve.ts';
import { collectBlobs } from '../../worker/blob-collector.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A batch is `starting` until its workflow started (issue 23 §5.2). Before: the batch row was
 * `running` from the moment it was stored, before its workflow start was even tried; a resend of
 * the submission (same x-request-id) that arrived while the start was failing answered 202 with
 * the batch, which the failed start then deleted: the caller held the id of a batch that never
 * existed. Now a resend of a batch still starting is a retryable 503; a start that fails takes the
 * batch back whole (503 "nothing was kept"); a started batch is `running`.
 */

/** Temporal's frontend as this API sees it: connections held without an answer until `fail()`, then refused. */
let frontend: Server;
const held: Socket[] = [];
let refusing = false;
const fail = () => {
  refusing = true;
  for (const s of held.splice(0)) s.destroy();
};
let connection: Connection;
let p: Pipeline;
/** The same API and database with a reachable Temporal and a worker. */
let live: Pipeline;
beforeAll(async () => {
  frontend = createServer((socket) => (refusing ? socket.destroy() : held.push(socket)));
  await new Promise<void>((resolve) => frontend.listen(0, '127.0.0.1', resolve));
  connection = Connection.lazy({ address: `127.0.0.1:${(frontend.address() as { port: number }).port}` });
  p = await startPipeline({ worker: false, deps: { temporal: new Client({ connection }) } });
  live = await startPipeline();
}, 120_000);
afterAll(async () => {
  await p?.close();
  await live?.close();
  await connection?.close().catch(() => {});
  fail();
  await new Promise((resolve) => frontend?.close(resolve));
});

describe('a batch whose workflow start fails', () => {
  it('a resend while it is starting is 503, not 202; the failed start keeps nothing; the id never shows', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const jpeg = await sharp({ create: { width: 40, height: 30, channels: 3, background: { r: 9, g: 120, b: 200 } } }).jpeg().toBuffer();
    const body = { items: [{ base64: jpeg.toString('base64') }], modules: ['dating'] };
    const send = () => p.app.inject({ method: 'POST', url: '/v1/batches', headers: { ...bearer(user.liveKey), 'x-request-id': 'start-race-1' }, payload: body });

    const first = send();
    // The batch is stored and its workflow start is under way (held by the frontend).
    let row: { id: string; status: string } | undefined;
    while (!row) row = (await p.db.query<{ id: string; status: string }>('SELECT id, status FROM batches WHERE user_id = $1', [user.userId])).rows[0];
    expect(row.status).toBe('starting');
    expect((await p.app.inject({ method: 'GET', url: `/v1/batches/${row.id}`, headers: bearer(user.liveKey) })).statusCode).toBe(404);

    const resend = await send();
    fail();
    const res = await first;

    expect(res.statusCode, res.body).toBe(503);
    expect(expectEnvelope(res.json())).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, message: expect.stringMatching(/could not be started; nothing was kept/) });
    expect(resend.statusCode, resend.body).toBe(503);
    expect(expectEnvelope(resend.json())).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, message: expect.stringMatching(/still starting/) });
    expect(resend.headers['retry-after']).toBe('1');
    // The batch is gone, its items with it: nothing answers for its id.
    expect((await p.db.query('SELECT 1 FROM batches WHERE id = $1', [row.id])).rowCount).toBe(0);
    expect((await p.db.query('SELECT 1 FROM batch_items WHERE batch_id = $1', [row.id])).rowCount).toBe(0);
    const after = await p.app.inject({ method: 'GET', url: `/v1/batches/${row.id}`, headers: bearer(user.liveKey) });
    expect(after.statusCode).toBe(404);
  }, 90_000);
});

/**
 * A batch stored by an API that died before its workflow started (the row is `starting`, no
 * workflow exists): intake by hand, then the row as createBatch leaves it.
 */
async function orphanedBatch(accountId: string, body: { items: Array<{ base64: string }>; modules: string[] }, requestId: string, ageMs: number) {
  const resolved = resolveLenses({ modules: body.modules });
  const photo = await takeBatchPhoto({ config: live.config, db: live.db, blobs: new FsBlobStore(live.config.BLOB_DIR), fetchPolicy: PUBLIC_INTERNET }, accountId, { base64: body.items[0]!.base64 }, 'test:orphan');
  if (!('ref' in photo)) throw new Error('intake refused the photo');
  const id = await createBatch(live.db, {
    accountId,
    kind: 'photos',
    spec: { stack: resolved.stack, lenses: resolved.lenses, billable: resolved.billable },
    columns: null,
    items: [{ source: 'upload 1', ref: photo.ref }],
    request: { id: requestId, hash: requestFingerprint(body) },
  });
  await live.db.query(`UPDATE batches SET created_at = now() - make_interval(secs => $2) WHERE id = $1`, [id, ageMs / 1000]);
  await live.db.query(`DELETE FROM blob_leases WHERE holder = 'test:orphan'`);
  return { id, sha256: photo.ref.sha256 };
}

const jpegOf = (r: number) => sharp({ create: { width: 40, height: 30, channels: 3, background: { r, g: 60, b: 160 } } }).jpeg().toBuffer();

describe('a batch its API left starting', () => {
  it('is started by a resend once no start attempt can still be running: 202 with the same batch, which runs', async () => {
    const user = await createTestAccount(live.db, { community: 10 });
    const body = { items: [{ base64: (await jpegOf(1)).toString('base64') }], modules: ['dating'] };
    const young = await orphanedBatch(user.userId, body, 'orphan-young', 1000);
    const send = (requestId: string) => live.app.inject({ method: 'POST', url: '/v1/batches', headers: { ...bearer(user.liveKey), 'x-request-id': requestId }, payload: body });
    // Stored a second ago: its start may still be under way.
    const early = await send('orphan-young');
    expect(early.statusCode, early.body).toBe(503);
    expect(expectEnvelope(early.json()).message).toMatch(/still starting/);
    expect(early.headers['retry-after']).toBe('1');
    expect((await live.db.query('SELECT status FROM batches WHERE id = $1', [young.id])).rows[0]).toEqual({ status: 'starting' });

    // Stored 100 s ago: its API most likely died mid-start; the resend is told when it may take
    // the start over (at 120 s), not asked back every second until then.
    await orphanedBatch(user.userId, body, 'orphan-old', 100_000);
    const waiting = await send('orphan-old');
    expect(waiting.statusCode, waiting.body).toBe(503);
    expect(Number(waiting.headers['retry-after'])).toBeGreaterThanOrEqual(18);
    expect(Number(waiting.headers['retry-after'])).toBeLessThanOrEqual(20);
    expect(expectEnvelope(waiting.json()).message).toMatch(new RegExp(`still starting; send the same request again in ${waiting.headers['retry-after']} s`));

    const stale = await orphanedBatch(user.userId, body, 'orphan-stale', 11 * 60_000);
    const res = await send('orphan-stale');
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toMatchObject({ id: stale.id, status: 'running', counts: { total: 1 } });
    // Its workflow exists now and runs the photo to the end.
    await live.temporal.workflow.getHandle(batchWorkflowId(user.userId, stale.id)).result();
    const done = await live.app.inject({ method: 'GET', url: `/v1/batches/${stale.id}`, headers: bearer(user.liveKey) });
    expect(done.json()).toMatchObject({ status: 'completed', counts: { done: 1, failed: 0 }, creditsCharged: 1 });
    // Resent again: the same batch, no second run.
    const again = await send('orphan-stale');
    expect(again.statusCode).toBe(202);
    expect(again.json()).toMatchObject({ id: stale.id, status: 'completed' });
  }, 90_000);

  it('nobody resends: after the grace the collector cancels it, fails its photo as never started and lets its bytes go', async () => {
    const user = await createTestAccount(live.db, { community: 10 });
    const body = { items: [{ base64: (await jpegOf(2)).toString('base64') }], modules: ['dating'] };
    const blobs = new FsBlobStore(live.config.BLOB_DIR);
    const recent = await orphanedBatch(user.userId, body, 'orphan-recent', 60_000);
    const old = await orphanedBatch(user.userId, { ...body, modules: ['dating', 'location'] }, 'orphan-old', 2 * 3600_000);
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    await utimes(blobs.pathOf(old.sha256), twoHoursAgo, twoHoursAgo);

    await collectBlobs(live.db, blobs, { graceMs: 3600_000 });
    expect((await live.db.query('SELECT status FROM batches WHERE id = $1', [recent.id])).rows[0]).toEqual({ status: 'starting' });
    const ended = await live.app.inject({ method: 'GET', url: `/v1/batches/${old.id}`, headers: bearer(user.liveKey) });
    expect(ended.json()).toMatchObject({ status: 'cancelled', counts: { total: 1, failed: 1, pending: 0 } });
    const item = (await live.db.query('SELECT status, error_code, error FROM batch_items WHERE batch_id = $1', [old.id])).rows[0];
    expect(item).toMatchObject({ status: 'failed', error_code: 'BATCH_FINISHED', error: expect.stringMatching(/could not be started/) });
    // The same photo is in both batches: the recent one still holds it.
    expect(await blobs.has(old.sha256)).toBe(true);
    await live.db.query('DELETE FROM batches WHERE id = $1', [recent.id]);
    await collectBlobs(live.db, blobs, { graceMs: 3600_000 });
    expect(await blobs.has(old.sha256)).toBe(false);
  });
});
