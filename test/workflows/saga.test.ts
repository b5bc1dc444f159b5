import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import { getBalance } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { createVisionClients, type VisionClient } from '../../vendors/index.ts';
import type { Vendor } from '../../workflows/types.ts';
import { analyzeWorkflow } from '../../workflows/analyze.ts';
import type { AnalyzeInput } from '../../workflows/types.ts';
import { createTestAccount } from '../helpers/app.ts';
import { quietTemporal, workflowBundle } from '../helpers/pipeline.ts';
import { testConfig } from '../harness/env.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';

/**
 * The saga's unwinding against a real Temporal server and database: a compensation that fails is
 * logged and skipped, and the caller sees the failure that started the unwinding, not the
 * compensation's. The reservation stays open for the sweeper, which closes it at its expiry.
 */
const config = testConfig({ TEMPORAL_TASK_QUEUE: `saga-${process.pid}` });
let db: Db;
let connection: Connection;
let client: Client;
let worker: Worker;
let running: Promise<void>;
let releaseAttempts = 0;
/** The worker's vendors, read by its activities at each call: a test sets them before it runs. */
const vision = new Map<Vendor, VisionClient>();

beforeAll(async () => {
  quietTemporal();
  db = createPool(config.DATABASE_URL, { max: 3 });
  const blobs = new FsBlobStore(config.BLOB_DIR);
  const activities = createActivities({ config, db, blobs, vision, metrics: createWorkerMetrics(), workCopies: createWorkCopies({ read: (sha) => blobs.get(sha), maxBytes: 1 << 20, maxPixels: config.IMAGE_MAX_PIXELS }) });
  worker = await Worker.create({
    connection: await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS! }),
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    workflowBundle: await workflowBundle(),
    activities: {
      ...activities,
      async releaseCredits() {
        releaseAttempts += 1;
        throw ApplicationFailure.nonRetryable('the ledger is unreachable', 'TEST_RELEASE_FAILED');
      },
    },
  });
  running = worker.run();
  connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS! });
  client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
}, 120_000);

afterAll(async () => {
  worker?.shutdown();
  await running;
  await connection?.close();
  await db?.end();
});

describe('the analyze saga unwinds', () => {
  it('a failing compensation is logged and skipped; the caller sees the original cause', async () => {
    // The worker's one vendor is never reached (the photo has no blob): the vendor step fails
    // after the reservation was made.
    vision.clear();
    vision.set('openai', createVisionClients(testConfig({ SIM_VENDOR_URL: 'http://127.0.0.1:9', VENDOR_ORDER: 'openai' })).clients[0]!);
    const { userId: accountId } = await createTestAccount(db, { community: 5 });
    const input: AnalyzeInput = {
      requestId: 'saga-failing-release',
      userId: accountId,
      stack: null,
      images: [{ sha256: 'c'.repeat(64), format: 'jpeg', width: 10, height: 10, pHash: '0000000000000001', dHash: '0000000000000002' }],
      lenses: ['dating', 'describe'],
      billable: ['dating', 'describe'],
      refresh: false,
      reservationTtlMs: 600_000,
      imageConcurrency: 4,
    };
    const workflowId = `analyze:${accountId}:saga-failing-release`;
    const run = client.workflow.execute(analyzeWorkflow, { taskQueue: config.TEMPORAL_TASK_QUEUE, workflowId, args: [input] });
    const failure = await run.then(() => null, (err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    const cause = (failure as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('PROVIDER_UNAVAILABLE');
    expect(cause.message).toMatch(/Every configured AI provider failed \(openai\)/);
    expect(releaseAttempts).toBe(1);
    // The release failed, so the 2 credits stay held until the reservation expires.
    expect(await getBalance(db, accountId)).toMatchObject({ community: 3, reserved: 2 });
    const res = await db.query<{ status: string; amount: number }>('SELECT status, amount FROM reservations WHERE id = $1', [`res:${workflowId}`]);
    expect(res.rows).toEqual([{ status: 'open', amount: 2 }]);
  }, 60_000);

  it('a worker with no vendor refuses a run with vendor work before anything is reserved', async () => {
    vision.clear();
    const { userId: accountId } = await createTestAccount(db, { community: 5 });
    const input: AnalyzeInput = {
      requestId: 'saga-no-vendor',
      userId: accountId,
      stack: null,
      images: [{ sha256: 'd'.repeat(64), format: 'jpeg', width: 10, height: 10, pHash: '0000000000000003', dHash: '0000000000000004' }],
      lenses: ['dating'],
      billable: ['dating'],
      refresh: false,
      reservationTtlMs: 600_000,
      imageConcurrency: 4,
    };
    const workflowId = `analyze:${accountId}:saga-no-vendor`;
    const failure = await client.workflow
      .execute(analyzeWorkflow, { taskQueue: config.TEMPORAL_TASK_QUEUE, workflowId, args: [input] })
      .then(() => null, (err: unknown) => err);
    const cause = (failure as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.cause ?? cause).toMatchObject({ type: 'PROVIDER_UNAVAILABLE', message: 'No AI provider is configured' });
    expect(await getBalance(db, accountId)).toMatchObject({ community: 5, reserved: 0 });
    expect((await db.query('SELECT 1 FROM reservations WHERE id = $1', [`res:${workflowId}`])).rowCount).toBe(0);
  }, 60_000);
});
