import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appErrorFromWorkflow } from '../../analysis/await-workflow.ts';
import { getBalance } from '../../credits/ledger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { analyzeWorkflow } from '../../workflows/analyze.ts';
import { createTestAccount } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Intake decodes every image before it starts a workflow, so the worker should never meet one it
 * cannot decode. If it does (a decoder difference, a damaged blob), preparing the image for the
 * vendor fails the same way for every attempt and every vendor: the saga must stop at once with
 * IMAGE_INVALID (422 for the caller) and release the credits, not retry 3 × 3 times and call it
 * PROVIDER_UNAVAILABLE.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => {
  await p?.close();
});

describe('an image the worker cannot prepare for the vendor', () => {
  it('fails the analysis with IMAGE_INVALID after one attempt of one vendor, and releases the credits', async () => {
    const user = await createTestAccount(p.db, { community: 5 });
    // JPEG magic bytes, then noise: no decoder takes it.
    const bytes = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), createHash('sha512').update(user.userId).digest()]);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    await new FsBlobStore(p.config.BLOB_DIR).put(sha256, bytes);
    const workflowId = `analyze:${user.userId}:req-undecodable`;

    const run = p.temporal.workflow.execute(analyzeWorkflow, {
      taskQueue: p.config.TEMPORAL_TASK_QUEUE,
      workflowId,
      args: [
        {
          requestId: 'req-undecodable',
          userId: user.userId,
          stack: null,
          images: [{ sha256, format: 'jpeg', width: 640, height: 480, pHash: '8000000000000000', dHash: '0000000000000000' }],
          lenses: ['moderation', 'describe', 'dating'],
          billable: ['describe', 'dating'],
          refresh: false,
          reservationTtlMs: 600_000,
          imageConcurrency: 8,
        },
      ],
    });
    const err = await run.then(() => null, (e: unknown) => e);
    const appErr = appErrorFromWorkflow(err);
    expect(appErr.code).toBe('IMAGE_INVALID');
    expect(appErr.status).toBe(422);

    const history = await p.temporal.workflow.getHandle(workflowId).fetchHistory();
    const scheduled = history.events!.filter((e) => e.activityTaskScheduledEventAttributes).map((e) => e.activityTaskScheduledEventAttributes!.activityType!.name);
    expect(scheduled).toEqual(['callOpenAI']);
    const started = history.events!.find((e) => e.activityTaskStartedEventAttributes)!;
    expect(started.activityTaskStartedEventAttributes!.attempt).toBe(1);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 5, reserved: 0 });
    const ledger = await p.db.query('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [user.userId]);
    expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'release']);
  }, 60_000);
});
