import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeForeign, decodeQueue } from '../../images/foreign-decode.ts';
import { createTestAccount } from '../helpers/app.ts';
import { bmpOf } from './foreign-inputs.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A caller that disconnects leaves the HEIC/BMP decode queue (issue 23 §5.3). Before: the request's
 * abort never reached images/foreign-decode.ts; a client that went away kept its place in the
 * queue, and its decode (seconds of a core for an 8.5 MP HEIC) ran for nobody when its turn came.
 * Now the connection's close aborts the request's intake, and a decode still waiting leaves.
 *
 * The API decodes an analyzed photo only for its embedding ("Decoding after the reservation",
 * docs/decisions.md): the dropped analysis asks for one, so its decode waits in the API's queue.
 * The other photo is decoded by the worker, which runs in this process too.
 */

let p: Pipeline;
let origin: string;
/** Responses the server saw closed before they finished (the client went away). */
const closedEarly: Array<() => void> = [];
beforeAll(async () => {
  p = await startPipeline();
  await p.app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(p.app.server.address() as AddressInfo).port}`;
  // Added after fastify's own listener: it sees each response's close before the route's does.
  p.app.server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.once('close', () => {
      if (!res.writableFinished) closedEarly.shift()?.();
    });
  });
}, 120_000);
afterAll(async () => {
  await p?.close();
});

const HEIC = photoBytes('heic-IMG_5195.HEIC');

/** A POST /v1/analyze over a real connection; `abort()` drops the connection. */
function analyze(key: string, image: Buffer, options: { includeEmbedding?: boolean } = {}): { answer: Promise<{ status: number; body: string }>; abort(): void } {
  return post('/v1/analyze', key, { imageBase64: image.toString('base64'), modules: ['dating'], options });
}

function post(path: string, key: string, payload: unknown): { answer: Promise<{ status: number; body: string }>; abort(): void } {
  const body = JSON.stringify(payload);
  const req = http.request(`${origin}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
  });
  req.end(body);
  return { answer, abort: () => req.destroy() };
}

/** Yield to the event loop until `ok` holds (no timer: the test's own timeout bounds it). */
async function until(ok: () => boolean): Promise<void> {
  while (!ok()) await new Promise((r) => setImmediate(r));
}

describe('a disconnected request leaves the decode queue', () => {
  it('fills the queue, drops a client: its HEIC decode never runs; the connected request behind it decodes', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    // What one BMP analysis decodes (intake's fingerprint, the worker's work copy), queue empty.
    const first = decodeQueue.started;
    const alone = await analyze(user.liveKey, bmpOf(Buffer.from([10, 40, 90, 200, 20, 30]), 2, 1)).answer;
    expect(alone.status, alone.body).toBe(200);
    const perBmp = decodeQueue.started - first;
    expect(perBmp).toBeGreaterThanOrEqual(1);

    // Both decode slots held until the test lets go: the requests below must wait in the queue.
    let letGo!: () => void;
    const held = new Promise<void>((r) => (letGo = r));
    const holders = [decodeQueue.slots.run(() => held), decodeQueue.slots.run(() => held)];
    expect(decodeQueue.active).toBe(2);
    const before = decodeQueue.started;

    const gone = analyze(user.liveKey, HEIC, { includeEmbedding: true });
    gone.answer.catch(() => undefined); // its connection is dropped on purpose
    await until(() => decodeQueue.waiting === 1);
    const seen = new Promise<void>((r) => closedEarly.push(r));
    gone.abort();
    await seen;
    // The route's close handler ran in the same 'close' event: the decode has left the queue.
    expect(decodeQueue.waiting).toBe(0);

    // A client that stays: its BMP waits behind where the dropped HEIC was, then decodes.
    const stays = analyze(user.liveKey, bmpOf(Buffer.from([200, 40, 90, 10, 220, 130]), 2, 1));
    await until(() => decodeQueue.waiting === 1);
    letGo();
    await Promise.all(holders);
    const res = await stays.answer;
    expect(res.status, res.body).toBe(200);
    expect(JSON.parse(res.body).usage.creditsCharged).toBe(1);
    // Only the BMP's decodes ran since the slots were held: the dropped HEIC's never started.
    expect(decodeQueue.started - before).toBe(perBmp);
    expect(decodeQueue.active + decodeQueue.waiting).toBe(0);
  }, 60_000);

  it('callers of the same bytes share one queued decode; it leaves the queue only when the last of them aborts', async () => {
    let letGo!: () => void;
    const held = new Promise<void>((r) => (letGo = r));
    const holders = [decodeQueue.slots.run(() => held), decodeQueue.slots.run(() => held)];
    const before = decodeQueue.started;
    const bmp = bmpOf(Buffer.from([1, 2, 3]), 1, 1);
    const [a, b] = [new AbortController(), new AbortController()];
    const first = decodeForeign('bmp', bmp, 1000, { signal: a.signal }).catch((e: unknown) => e);
    const second = decodeForeign('bmp', bmp, 1000, { signal: b.signal }).catch((e: unknown) => e);
    expect(decodeQueue.waiting).toBe(1); // one decode for both
    a.abort(new Error('first client went away'));
    expect(await first).toMatchObject({ message: 'first client went away' });
    expect(decodeQueue.waiting).toBe(1); // the second still waits for it
    b.abort(new Error('second client went away'));
    expect(await second).toMatchObject({ message: 'second client went away' });
    expect(decodeQueue.waiting).toBe(0);

    // Once nobody waits, the same bytes decode afresh; a caller without a signal keeps its decode
    // running when a sharer with one leaves.
    const c = new AbortController();
    const pinned = decodeForeign('bmp', bmp, 1000);
    const leaving = decodeForeign('bmp', bmp, 1000, { signal: c.signal }).catch((e: unknown) => e);
    c.abort(new Error('third client went away'));
    expect(await leaving).toMatchObject({ message: 'third client went away' });
    expect(decodeQueue.waiting).toBe(1);
    letGo();
    await Promise.all(holders);
    expect([...(await pinned).pixels]).toEqual([1, 2, 3]);
    expect(decodeQueue.started - before).toBe(1);
  });

  it('a lookup by image whose client disconnects leaves the queue too', async () => {
    const user = await createTestAccount(p.db, { community: 0 });
    let letGo!: () => void;
    const held = new Promise<void>((r) => (letGo = r));
    const holders = [decodeQueue.slots.run(() => held), decodeQueue.slots.run(() => held)];
    const before = decodeQueue.started;
    const gone = post('/v2/lookup', user.liveKey, { images_base64: [HEIC.toString('base64')] });
    gone.answer.catch(() => undefined);
    await until(() => decodeQueue.waiting === 1);
    const seen = new Promise<void>((r) => closedEarly.push(r));
    gone.abort();
    await seen;
    expect(decodeQueue.waiting).toBe(0);
    letGo();
    await Promise.all(holders);
    expect(decodeQueue.started - before).toBe(0);
  });
});
