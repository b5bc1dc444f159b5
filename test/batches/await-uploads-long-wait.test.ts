import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getBalance, sweepExpired } from '../../credits/ledger.ts';
import { bearer, createTestAccount, uploadUnderId } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A waiting vehicle holds its report's price from the start of its wait (activities/batch.ts
 * vehicleUploadsArriving). BATCH_UPLOAD_WAIT_MS is a setting of its own, so a wait may be longer
 * than RESERVATION_TTL_MS (a slow fleet given 30 minutes, holds of 15): the hold must outlast the
 * wait, or the sweeper closes it while the vehicle still waits, and once the photos are in, the
 * report refuses the closed reservation and the vehicle fails though nothing went wrong.
 */
const TTL_MS = 25_000;
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline({ config: { WORKFLOW_TIMEOUT_MS: 20_000, RESERVATION_TTL_MS: TTL_MS, BATCH_UPLOAD_WAIT_MS: 180_000 } });
}, 120_000);
afterAll(async () => p?.close());

const get = async (key: string, url: string) => (await p.app.inject({ method: 'GET', url, headers: bearer(key) })).json();

it('a vehicle waiting longer than a hold\'s TTL keeps its hold through the sweeper, and runs and bills once its photo arrives', async () => {
  const user = await createTestAccount(p.db, { community: 5 });
  const id = `upl_${randomBytes(16).toString('hex')}`;
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  const batch = res.json() as { id: string };
  const held = async () => (await p.db.query<{ id: string }>(`SELECT id FROM reservations WHERE user_id = $1 AND status = 'open'`, [user.userId])).rows;
  await expect.poll(async () => (await held()).length, { timeout: 60_000, interval: 200 }).toBe(1);
  const holdId = (await held())[0]!.id;

  // The wait has lasted longer than a hold's TTL (by the database's clock), and the sweeper passes.
  const pastTtl = async () => (await p.db.query<{ past: boolean }>(`SELECT now() > created_at + make_interval(secs => $2) AS past FROM reservations WHERE id = $1`, [holdId, TTL_MS / 1000 + 1])).rows[0]!.past;
  await expect.poll(pastTtl, { timeout: 60_000, interval: 500 }).toBe(true);
  await sweepExpired(p.db);
  expect((await p.db.query<{ status: string }>('SELECT status FROM reservations WHERE id = $1', [holdId])).rows[0]!.status).toBe('open');

  const bytes = photoBytes('Canon_40D.jpg');
  const up = await uploadUnderId(p.app, user.liveKey, id, bytes);
  expect(up.statusCode, up.body).toBe(201);
  await expect.poll(async () => (await get(user.liveKey, `/v1/batches/${batch.id}`)).status, { timeout: 60_000, interval: 250 }).toBe('completed');
  expect((await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items[0]).toMatchObject({ source: 'van', status: 'done', creditsCharged: 1 });
  expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 4, reserved: 0 });
}, 180_000);
