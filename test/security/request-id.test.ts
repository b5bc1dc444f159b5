import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { WorkflowFailedError } from '@temporalio/client';
import { FsBlobStore } from '../../images/blobstore.ts';
import { fingerprint } from '../../images/fingerprint.ts';
import type { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analyzeWorkflow } from '../../workflows/analyze.ts';
import type { AnalyzeInput } from '../../workflows/types.ts';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * An x-request-id means one request. Before: the same id with another body answered 500 forever
 * (or a 200 with the first run's output and charge), and once Temporal forgot the workflow the
 * same id ran the vendors again for free against the closed reservation. Now Postgres binds the id
 * to a fingerprint of the request: same request → the same answer (same analysis id, billed once);
 * another request → 409 REQUEST_ID_CONFLICT; a run started again under a finished run's id
 * (Temporal forgot it) refuses before any vendor call.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => {
  await p?.close();
});

const send = (key: string, requestId: string, payload: Record<string, unknown>) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(key), 'x-request-id': requestId }, payload });
const vendorCalls = () => Object.values(p.sim.stats()).reduce((n, s) => n + s.calls, 0);
const photoRows = async (accountId: string) => (await p.db.query('SELECT sha256 FROM photos WHERE user_id = $1', [accountId])).rowCount;

describe('x-request-id is bound to its request', () => {
  it('the same id and request get the same answer, the same analysis id, billed once, with no second vendor call', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const body = { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating', 'describe'] };
    const first = await send(user.liveKey, 'rid-same', body);
    expect(first.statusCode, first.body).toBe(200);
    const calls = vendorCalls();
    // Same request with its keys in another order: the same request.
    const again = await send(user.liveKey, 'rid-same', { modules: ['dating', 'describe'], imageBase64: body.imageBase64 });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().id).toBe(first.json().id);
    expect(again.json()).toEqual(first.json());
    expect(vendorCalls()).toBe(calls);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 8, reserved: 0 });
  });

  it('the same id with another request is 409 REQUEST_ID_CONFLICT and changes nothing', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const first = await send(user.liveKey, 'rid-other', { imageBase64: photoBase64('Nikon_D70.jpg'), modules: ['dating'] });
    expect(first.statusCode, first.body).toBe(200);
    const photos = await photoRows(user.userId);
    const calls = vendorCalls();
    // A photo no account has sent: nothing but this request could have written its blob.
    const unseen = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 40 } } }).jpeg().toBuffer();
    for (const other of [
      { imageBase64: unseen.toString('base64'), modules: ['dating'] },
      { imageBase64: photoBase64('Nikon_D70.jpg'), modules: ['dating', 'describe'] },
      { imageBase64: photoBase64('Nikon_D70.jpg'), modules: ['dating'], refresh: true },
      { imageBase64: photoBase64('Nikon_D70.jpg'), modules: ['dating'], context: { customInstructions: 'cars' } },
    ]) {
      const res = await send(user.liveKey, 'rid-other', other);
      expect(res.statusCode, res.body).toBe(409);
      const err = expectEnvelope(res.json());
      expect(err.code).toBe('REQUEST_ID_CONFLICT');
      expect(err.message).toMatch(/already used for a different request/);
      expect(err.retryable).toBe(false);
    }
    expect(vendorCalls()).toBe(calls);
    expect(await photoRows(user.userId)).toBe(photos);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
    // The id is bound while the images are taken in: the new photo's blob, written meanwhile, is gone.
    const blobs = new FsBlobStore(p.config.BLOB_DIR);
    expect(await blobs.has(createHash('sha256').update(unseen).digest('hex'))).toBe(false);
  });

  it('another account may use the same id for its own request', async () => {
    const a = await createTestAccount(p.db, { community: 5 });
    const b = await createTestAccount(p.db, { community: 5 });
    const ra = await send(a.liveKey, 'rid-shared', { imageBase64: photoBase64('gps-DSCN0021.jpg'), modules: ['dating'] });
    const rb = await send(b.liveKey, 'rid-shared', { imageBase64: photoBase64('gps-DSCN0012.jpg'), modules: ['describe'] });
    expect([ra.statusCode, rb.statusCode]).toEqual([200, 200]);
    expect(rb.json().id).not.toBe(ra.json().id);
  });

  it('a run Temporal has forgotten does not run again: no vendor call, no charge', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const body = { imageBase64: photoBase64('orientation-landscape_6.jpg'), modules: ['dating', 'describe'], options: { includeFingerprint: true } };
    const first = await send(user.liveKey, 'rid-forgotten', body);
    expect(first.statusCode, first.body).toBe(200);
    const fp = first.json().fingerprint as { sha256: string; pHash: string; dHash: string };
    // Once Temporal's retention removed the closed workflow, its id can be started again: do that
    // directly, with the input the API builds for this request.
    const input: AnalyzeInput = {
      requestId: 'rid-forgotten',
      userId: user.userId,
      stack: null,
      images: [{ ...fp, format: 'jpeg', width: 1, height: 1 }],
      lenses: ['dating', 'describe', 'moderation'],
      billable: ['dating', 'describe'],
      refresh: false,
      reservationTtlMs: 600_000,
      imageConcurrency: 4,
    };
    const calls = vendorCalls();
    const rerun = p.temporal.workflow.execute(analyzeWorkflow, {
      taskQueue: p.config.TEMPORAL_TASK_QUEUE,
      workflowId: `analyze:${user.userId}:rid-forgotten`,
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      args: [input],
    });
    const failure = await rerun.then(() => null, (err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect(((failure as WorkflowFailedError).cause as ApplicationFailure).type).toBe('REQUEST_ID_CONFLICT');
    expect(vendorCalls()).toBe(calls);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 8, reserved: 0 });
    const runs = await p.db.query('SELECT credits FROM analysis_runs WHERE workflow_id = $1', [`analyze:${user.userId}:rid-forgotten`]);
    expect(runs.rows).toEqual([{ credits: 2 }]);
  }, 60_000);

  it('a failed run Temporal has forgotten does not run again either: its reservation is closed', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const body = { imageBase64: photoBase64('orientation-landscape_1.jpg'), modules: ['dating'], options: { includeFingerprint: true } };
    // The first run fails (every vendor rejects it) and releases its credits: nothing persisted.
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http400' });
    const first = await send(user.liveKey, 'rid-failed', body).finally(() => {
      for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 0 });
    });
    expect(first.statusCode, first.body).toBe(502);
    const fp = await fingerprint(photoBytes('orientation-landscape_1.jpg'));
    const input: AnalyzeInput = {
      requestId: 'rid-failed',
      userId: user.userId,
      stack: null,
      images: [{ sha256: fp.sha256, pHash: fp.pHash, dHash: fp.dHash, format: 'jpeg', width: 1, height: 1 }],
      lenses: ['dating', 'moderation'],
      billable: ['dating'],
      refresh: false,
      reservationTtlMs: 600_000,
      imageConcurrency: 4,
    };
    const calls = vendorCalls();
    const rerun = p.temporal.workflow.execute(analyzeWorkflow, {
      taskQueue: p.config.TEMPORAL_TASK_QUEUE,
      workflowId: `analyze:${user.userId}:rid-failed`,
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      args: [input],
    });
    const failure = await rerun.then(() => null, (err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect(((failure as WorkflowFailedError).cause as ApplicationFailure).type).toBe('REQUEST_ID_CONFLICT');
    expect(vendorCalls()).toBe(calls);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    expect(await photoRows(user.userId)).toBe(0);
  }, 60_000);

  it('a request refused before anything ran leaves its id free for the corrected request', async () => {
    const user = await createTestAccount(p.db, { community: 5 });
    const truncated = photoBytes('Canon_40D.jpg').subarray(0, 3000).toString('base64');
    const broken = await send(user.liveKey, 'rid-fixed', { imageBase64: truncated, modules: ['dating'] });
    expect(broken.statusCode, broken.body).toBe(422);
    const fixed = await send(user.liveKey, 'rid-fixed', { imageBase64: photoBase64('xmp-BlueSquare.jpg'), modules: ['dating'] });
    expect(fixed.statusCode, fixed.body).toBe(200);
    expect(fixed.json().usage.creditsCharged).toBe(1);
  });
});
