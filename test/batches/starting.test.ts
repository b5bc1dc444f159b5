import { createServer, type Server, type Socket } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestUser, expectEnvelope } from '../helpers/app.ts';
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
beforeAll(async () => {
  frontend = createServer((socket) => (refusing ? socket.destroy() : held.push(socket)));
  await new Promise<void>((resolve) => frontend.listen(0, '127.0.0.1', resolve));
  connection = Connection.lazy({ address: `127.0.0.1:${(frontend.address() as { port: number }).port}` });
  p = await startPipeline({ worker: false, deps: { temporal: new Client({ connection }) } });
}, 120_000);
afterAll(async () => {
  await p?.close();
  await connection?.close().catch(() => {});
  fail();
  await new Promise((resolve) => frontend?.close(resolve));
});

describe('a batch whose workflow start fails', () => {
  it('a resend while it is starting is 503, not 202; the failed start keeps nothing; the id never shows', async () => {
    const user = await createTestUser(p.db, { community: 10 });
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
