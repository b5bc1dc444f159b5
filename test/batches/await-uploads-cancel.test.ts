import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { batchWorkflowId } from '../../batches/submit.ts';
import { bearer, createTestUser } from '../helpers/app.ts';
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

it('a batch cancelled while its vehicle waits for an upload runs and bills nothing of it, even when the upload then arrives', async () => {
  const user = await createTestUser(p.db, { community: 5 });
  const id = `upl_${randomBytes(16).toString('hex')}`;
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  const batch = res.json();
  // The vehicle's step is at its turn, waiting for the upload (its heartbeat says so).
  const handle = p.temporal.workflow.getHandle(batchWorkflowId(user.userId, batch.id));
  await expect.poll(async () => (await handle.describe()).raw.pendingActivities?.map((a) => a.activityType?.name) ?? [], { timeout: 60_000, interval: 200 })
    .toContain('prepareBatchVehicle');
  expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${batch.id}/cancel`, headers: bearer(user.liveKey) })).statusCode).toBe(202);

  const bytes = photoBytes('Canon_40D.jpg');
  const up = await p.app.inject({
    method: 'POST',
    url: '/v1/uploads',
    headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(bytes.length), 'upload-metadata': `uploadId ${Buffer.from(id).toString('base64')}`, 'content-type': 'application/offset+octet-stream' },
    payload: bytes,
  });
  expect(up.statusCode, up.body).toBe(201);

  await expect.poll(async () => (await get(user.liveKey, `/v1/batches/${batch.id}`)).status, { timeout: 60_000, interval: 250 }).toBe('cancelled');
  const [item] = (await get(user.liveKey, `/v1/batches/${batch.id}/items`)).items;
  expect(item).toMatchObject({ source: 'van', creditsCharged: 0 });
  expect(item.status).not.toBe('done');
  expect((await p.db.query('SELECT count(*)::int AS n FROM vehicle_reports WHERE user_id = $1', [user.userId])).rows[0].n).toBe(0);
  expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
}, 150_000);
