import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestAccount, uploadUnderId } from '../helpers/app.ts';
import { photoBase64, photoBytes } from '../helpers/photos.ts';
import { startPipeline, workflowBundle, type Pipeline } from '../helpers/pipeline.ts';

const HISTORIES = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));
/** Set by `npm run histories:record`: the fresh tests write the fixtures that are missing. */
const RECORDING = process.env.LENSTACK_RECORD_HISTORIES === '1';
let p: Pipeline;

beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());

/** Run one analysis through HTTP and return its workflow history as JSON. */
async function record(body: Record<string, unknown>, credits: number, status: number) {
  const user = await createTestAccount(p.db, { community: credits });
  const requestId = `replay-${user.userId}`;
  const res = await p.app.inject({ method: 'POST', url: '/v2/analyze', headers: { ...bearer(user.liveKey), 'x-request-id': requestId }, payload: body });
  expect(res.statusCode, res.body).toBe(status);
  const prefix = body.preset === 'vehicle-condition' ? 'vehicle' : 'analyze';
  const history = await p.temporal.workflow.getHandle(`${prefix}:${user.userId}:${requestId}`).fetchHistory();
  return history;
}

/**
 * A vehicle batch that awaits its uploads (awaitUploads): its vehicle at its turn while the photo
 * is still to come, then the photo uploaded. Its history holds the vehicle's wait.
 */
async function recordAwaitingBatch(): Promise<NonNullable<Awaited<ReturnType<ReturnType<Pipeline['temporal']['workflow']['getHandle']>['fetchHistory']>>>> {
  const user = await createTestAccount(p.db, { community: 5 });
  const id = `upl_${randomBytes(16).toString('hex')}`;
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  const batchId = res.json().id;
  // At its turn: the report's price held, waiting.
  await expect.poll(async () => (await p.db.query(`SELECT count(*)::int AS n FROM reservations WHERE user_id = $1 AND status = 'open'`, [user.userId])).rows[0].n, { timeout: 30_000, interval: 100 }).toBe(1);
  const bytes = photoBytes('Canon_40D.jpg');
  const up = await uploadUnderId(p.app, user.liveKey, id, bytes);
  expect(up.statusCode, up.body).toBe(201);
  await expect.poll(async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${batchId}`, headers: bearer(user.liveKey) })).json().status, { timeout: 30_000, interval: 250 }).toBe('completed');
  return p.temporal.workflow.getHandle(`batch:${user.userId}:${batchId}`).fetchHistory();
}

describe('BatchWorkflow replays deterministically', () => {
  it('a fresh history of a vehicle batch awaiting its uploads replays with the current code', async () => {
    p.sim.reset();
    const history = await recordAwaitingBatch();
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, 'fresh-batch-await-uploads');
    const file = `${HISTORIES}batch-await-uploads.json`;
    if (RECORDING && !existsSync(file)) writeFileSync(file, historyToJSON(history!));
    expect(existsSync(file), `no recorded history ${file}: record it with \`npm run histories:record\` and commit it`).toBe(true);
  }, 60_000);
});

describe('AnalyzeWorkflow replays deterministically', () => {
  const scenarios: Array<[string, () => void, Record<string, unknown>, number, number]> = [
    ['success', () => {}, { imageBase64: photoBase64('Canon_40D.jpg'), modules: ['dating', 'describe'] }, 10, 200],
    ['fallback', () => p.sim.setBehaviour('openai', { failRate: 1, failure: 'schema-invalid' }), { imageBase64: photoBase64('Nikon_D70.jpg'), modules: ['describe'] }, 10, 200],
    ['compensation', () => ['openai', 'anthropic', 'google'].forEach((v) => p.sim.setBehaviour(v as 'openai', { failRate: 1, failure: 'http400' })), { imageBase64: photoBase64('Pentax_K10D.jpg'), modules: ['describe'] }, 10, 502],
    ['two-images', () => {}, { images: [{ base64: photoBase64('gps-DSCN0010.jpg') }, { base64: photoBase64('gps-DSCN0012.jpg') }], modules: ['location'] }, 10, 200],
    ['extract', () => {}, { imageBase64: photoBase64('Canon_40D.jpg'), preset: 'quick-scan', extract: { prompt: 'the dominant colour' } }, 10, 200],
    ['vehicle', () => {}, { images: [{ base64: photoBase64('gps-DSCN0010.jpg') }, { base64: photoBase64('gps-DSCN0021.jpg') }], preset: 'vehicle-condition' }, 10, 200],
  ];

  for (const [name, arrange, body, credits, status] of scenarios) {
    it(`a fresh ${name} history replays with the current code`, async () => {
      p.sim.reset();
      arrange();
      const history = await record(body, credits, status);
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, `fresh-${name}`);
      // The first recording is kept as a fixture: later code must still replay it. Recording is a
      // separate, explicit command (`npm run histories:record`); an ordinary run never writes one,
      // so a missing fixture fails here instead of being recorded by the code it should check.
      const file = `${HISTORIES}${name}.json`;
      if (RECORDING && !existsSync(file)) writeFileSync(file, historyToJSON(history!));
      expect(existsSync(file), `no recorded history ${file}: record it with \`npm run histories:record\` and commit it`).toBe(true);
    }, 60_000);
  }

  it('every recorded history in test/fixtures/histories replays with the current code', async () => {
    const files = readdirSync(HISTORIES).filter((f) => f.endsWith('.json'));
    // One recording per scenario above, by name (a count would let a stray file stand in for one).
    expect(files).toEqual(expect.arrayContaining(scenarios.map(([name]) => `${name}.json`)));
    for (const f of files) {
      const history = historyFromJSON(JSON.parse(readFileSync(HISTORIES + f, 'utf8')));
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, f);
    }
  }, 60_000);
});
