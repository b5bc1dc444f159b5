import { randomBytes } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import { createBatch } from '../../batches/repository.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';
import { createVisionClients } from '../../vendors/index.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, buildTestApp, createTestAccount, type TestApp, uploadUnderId } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';

/**
 * A vehicle of an awaitUploads batch waits at its turn (up to 10 minutes) for its uploads, holding
 * its report's price (docs/decisions.md, "The fleet's analysis overlaps its uploads"). That hold's
 * TTL (RESERVATION_TTL_MS) is sized to exceed the report's run (WORKFLOW_TIMEOUT_MS) alone: aged
 * through a wait of 10 minutes then a report of up to 10, it would lapse mid-report, the sweeper
 * releasing it and the report going unbilled. So once the wait is over it counts again from then.
 * The wait's minutes are stood in for by moving the hold's expiry to one minute away meanwhile.
 */
let t: TestApp;
let acts: ReturnType<typeof createActivities>;
beforeAll(async () => {
  t = await buildTestApp();
  const blobs = new FsBlobStore(t.config.BLOB_DIR);
  const vision = new Map(createVisionClients({ ...t.config, SIM_VENDOR_URL: 'http://127.0.0.1:9' }).clients.map((c) => [c.vendor, c]));
  acts = createActivities({ config: t.config, db: t.db, blobs, vision, metrics: createWorkerMetrics(), workCopies: createWorkCopies({ read: (sha) => blobs.get(sha), maxBytes: 1 << 20, maxPixels: t.config.IMAGE_MAX_PIXELS }) });
}, 60_000);
afterAll(async () => t?.close());

it('holds the report\'s price while a vehicle waits for its uploads, and its whole TTL again from the moment they arrived', async () => {
  const user = await createTestAccount(t.db, { community: 5 });
  const uploadId = `upl_${randomBytes(16).toString('hex')}`;
  const batchId = await createBatch(t.db, {
    accountId: user.userId,
    kind: 'vehicles',
    spec: { stack: null, lenses: ['vehicle-condition'], billable: ['vehicle-condition'] },
    columns: null,
    items: [{ source: 'van', ref: null, photos: [{ source: 'front.jpg', uploadId }] }],
  });
  const workflowId = `vehicle-hold-${uploadId}`;
  const hold = { reservationId: `res:${workflowId}`, workflowId, userId: user.userId, amount: 1, ttlMs: t.config.RESERVATION_TTL_MS };
  const openHolds = async () =>
    (await t.db.query<{ id: string; expires_at: Date }>(`SELECT id, expires_at FROM reservations WHERE user_id = $1 AND status = 'open'`, [user.userId])).rows;

  const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
  // The first heartbeat is the step's first look at its uploads that found them still arriving.
  let heldWhileWaiting: Awaited<ReturnType<typeof openHolds>> = [];
  let waiting!: () => void;
  const firstLook = new Promise<void>((r) => (waiting = r));
  env.on('heartbeat', (d: unknown) => {
    if (d === 'awaiting uploads') waiting();
  });
  const step = env.run(acts.prepareBatchVehicle, { batchId, index: 0, hold }) as ReturnType<typeof acts.prepareBatchVehicle>;
  await firstLook;
  heldWhileWaiting = await openHolds();
  const balanceWhileWaiting = await getBalance(t.db, user.userId);
  // Fourteen of its fifteen minutes spent waiting.
  await t.db.query(`UPDATE reservations SET expires_at = now() + interval '1 minute' WHERE id = $1`, [hold.reservationId]);

  const bytes = photoBytes('Canon_40D.jpg');
  const arrivedAt = Date.now();
  const up = await uploadUnderId(t.app, user.liveKey, uploadId, bytes);
  expect(up.statusCode, up.body).toBe(201);
  const ready = await step;

  expect(heldWhileWaiting.map((r) => r.id)).toEqual([hold.reservationId]);
  expect(balanceWhileWaiting).toMatchObject({ community: 4, reserved: 1 });
  expect(ready).toMatchObject({ refs: [{ sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }] });
  const after = await openHolds();
  expect(after.map((r) => r.id)).toEqual([hold.reservationId]);
  // The whole TTL counts from the uploads' arrival, not from the vehicle's turn.
  expect(after[0]!.expires_at.getTime()).toBeGreaterThanOrEqual(arrivedAt + t.config.RESERVATION_TTL_MS - 1000);
  expect(await getBalance(t.db, user.userId)).toMatchObject({ community: 4, reserved: 1 });
});
