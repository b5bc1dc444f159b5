import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount, uploadUnderId } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Upload ids a client chose (Upload-Metadata uploadId) named by a pending awaitUploads batch
 * before they exist (docs/decisions.md, "The fleet's analysis overlaps its uploads"): another
 * account that makes an upload under such an id (it would have to know it: 128 random bits) gets
 * its bytes into nobody's batch. The vehicle fails naming the id, nothing is billed, and the
 * squatter's upload stays its own.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
  await p.startWorker();
}, 120_000);
afterAll(async () => p?.close());

const get = async (key: string, url: string) => (await p.app.inject({ method: 'GET', url, headers: bearer(key) })).json();

it('an upload another account makes under an id a pending batch awaits is never analyzed for that batch', async () => {
  const owner = await createTestAccount(p.db, { community: 5 });
  const squatter = await createTestAccount(p.db, { community: 5 });
  const id = `upl_${randomBytes(16).toString('hex')}`;
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(owner.liveKey), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  const batch = res.json();
  expect((await uploadUnderId(p.app, squatter.liveKey, id, photoBytes('Canon_40D.jpg'))).statusCode).toBe(201);
  // The owner can no longer make its own upload under that id: refused, the squatter's untouched.
  const own = await uploadUnderId(p.app, owner.liveKey, id, photoBytes('Nikon_D70.jpg'));
  expect(own.statusCode).toBe(400);
  expect(own.json().error.message).toContain('is taken');

  await expect.poll(async () => (await get(owner.liveKey, `/v1/batches/${batch.id}`)).status, { timeout: 60_000, interval: 250 }).toBe('completed');
  const [item] = (await get(owner.liveKey, `/v1/batches/${batch.id}/items`)).items;
  expect(item).toMatchObject({ source: 'van', status: 'failed', creditsCharged: 0, error: { code: 'NOT_FOUND' } });
  expect(item.error.message).toContain(`no upload ${id} for this account`);
  expect((await p.db.query('SELECT count(*)::int AS n FROM vehicle_reports WHERE user_id = $1', [owner.userId])).rows[0].n).toBe(0);
  expect(await getBalance(p.db, owner.userId)).toMatchObject({ community: 5, reserved: 0 });
  expect((await p.db.query('SELECT user_id FROM uploads WHERE id = $1', [id])).rows[0].user_id).toBe(squatter.userId);
}, 150_000);
