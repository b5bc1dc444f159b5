import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount, uploadUnderId } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A vehicle of an awaitUploads batch waits at its turn for its uploads, up to 10 minutes
 * (docs/decisions.md, "The fleet's analysis overlaps its uploads"). Cancelling the batch meanwhile
 * must end that wait: the vehicle has done nothing yet, so nothing of it runs or is billed once the
 * caller said stop, even if its photo arrives afterwards (a second CLI, an upload already under way).
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
  await p.startWorker();
}, 120_000);
afterAll(async () => p?.close());

const get = async (key: string, url: string) => (await p.app.inject({ method: 'GET', url, headers: bearer(key) })).json();
const post = (key: string, url: string) => p.app.inject({ method: 'POST', url, headers: bearer(key) });
const newId = () => `upl_${randomBytes(16).toString('hex')}`;
const submitAwaiting = async (key: string, id: string) => {
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(key), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  return res.json() as { id: string };
};
/** A vehicle at its turn holds its report's price before it waits for its uploads: that hold is how a test sees it waiting. */
const openHolds = async (accountId: string) => (await p.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM reservations WHERE user_id = $1 AND status = 'open'`, [accountId])).rows[0]!.n;
const waiting = (accountId: string) => expect.poll(() => openHolds(accountId), { timeout: 60_000, interval: 200 }).toBe(1);
/** Well under the wait's 10 minutes, and over a workflow task's round trip on a busy machine. */
const PROMPTLY = { timeout: 15_000, interval: 200 };

it('a batch cancelled while its vehicle waits for an upload runs and bills nothing of it, even when the upload then arrives', async () => {
  const user = await createTestAccount(p.db, { community: 5 });
  const id = `upl_${randomBytes(16).toString('hex')}`;
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  const batch = res.json();
  // The vehicle is at its turn, waiting for the upload with its report's price held.
  await waiting(user.userId);
  expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${batch.id}/cancel`, headers: bearer(user.liveKey) })).statusCode).toBe(202);

  const bytes = photoBytes('Canon_40D.jpg');
  const up = await uploadUnderId(p.app, user.liveKey, id, bytes);
  expect(up.statusCode, up.body).toBe(201);

  await expect.poll(async () => (await get(user.liveKey, `/v1/batches/${batch.id}`)).status, { timeout: 60_000, interval: 250 }).toBe('cancelled');
  const [item] = (await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items;
  expect(item).toMatchObject({ source: 'van', creditsCharged: 0 });
  expect(item.status).not.toBe('done');
  expect((await p.db.query('SELECT count(*)::int AS n FROM vehicle_reports WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
  expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
}, 150_000);

it('a cancel ends a vehicle\'s wait for its uploads at once: the batch reads cancelled, the vehicle failed, its hold given back', async () => {
  const user = await createTestAccount(p.db, { community: 5 });
  const batch = await submitAwaiting(user.liveKey, newId());
  await waiting(user.userId);
  expect((await post(user.liveKey, `/v1/batches/${batch.id}/cancel`)).statusCode).toBe(202);

  // No upload comes: the wait must not run on to its 10 minutes.
  await expect.poll(async () => (await get(user.liveKey, `/v1/batches/${batch.id}`)).status, PROMPTLY).toBe('cancelled');
  const [item] = (await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items;
  expect(item).toMatchObject({ source: 'van', status: 'failed', creditsCharged: 0, error: { code: 'BATCH_FINISHED' } });
  expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
}, 90_000);

it('a pause ends a vehicle\'s wait at once: the batch reads paused, the vehicle stays pending holding nothing, and after resume it runs once its upload arrives', async () => {
  const user = await createTestAccount(p.db, { community: 5 });
  const id = newId();
  const batch = await submitAwaiting(user.liveKey, id);
  await waiting(user.userId);
  expect((await post(user.liveKey, `/v1/batches/${batch.id}/pause`)).statusCode).toBe(202);

  await expect.poll(async () => (await get(user.liveKey, `/v1/batches/${batch.id}`)).status, PROMPTLY).toBe('paused');
  // As any paused batch: what has not run waits for resume, holding no credits meanwhile.
  expect((await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items[0]).toMatchObject({ source: 'van', status: 'pending', creditsCharged: 0 });
  await expect.poll(() => getBalance(p.db, user.userId), PROMPTLY).toMatchObject({ community: 5, reserved: 0 });

  expect((await post(user.liveKey, `/v1/batches/${batch.id}/resume`)).statusCode).toBe(202);
  await waiting(user.userId);
  expect((await uploadUnderId(p.app, user.liveKey, id, photoBytes('Canon_40D.jpg'))).statusCode).toBe(201);
  await expect.poll(async () => (await get(user.liveKey, `/v1/batches/${batch.id}`)).status, { timeout: 60_000, interval: 250 }).toBe('completed');
  expect((await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items[0]).toMatchObject({ source: 'van', status: 'done', creditsCharged: 1 });
  expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 4, reserved: 0 });
}, 150_000);
