import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount, uploadUnderId } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * A vehicle waiting for its uploads (awaitUploads) is woken by a signal when one of them settles
 * (batches/upload-waits.ts). Upload ids may be chosen by the client, so another account can make an
 * upload under an id this account's batch awaits. That account's upload is not this account's: it
 * must not wake this account's batch, nor take away its registration. The vehicle finds out on its
 * own (its 30 s look) that the id is another account's, as the design says.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());

const get = async (key: string, url: string) => (await p.app.inject({ method: 'GET', url, headers: bearer(key) })).json();
const waitRows = async (batchId: string) => (await p.db.query<{ n: number }>('SELECT count(*)::int AS n FROM upload_waits WHERE batch_id = $1', [batchId])).rows[0]!.n;

it('another account\'s upload under an id a batch awaits neither signals that batch nor drops its wait; the vehicle fails on its own look, its hold given back', async () => {
  const a = await createTestAccount(p.db, { community: 5 });
  const b = await createTestAccount(p.db, { community: 5 });
  const id = `upl_${randomBytes(16).toString('hex')}`;
  const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(a.liveKey), payload: { awaitUploads: true, vehicles: [{ name: 'van', items: [{ uploadId: id, name: 'front.jpg' }] }] } });
  expect(res.statusCode, res.body).toBe(202);
  const batch = res.json() as { id: string };
  // A's vehicle at its turn: its price held, its wait registered.
  await expect.poll(() => waitRows(batch.id), { timeout: 60_000, interval: 200 }).toBe(1);

  // B makes an upload under that id: an ordinary upload of B's, answered as any other.
  expect((await uploadUnderId(p.app, b.liveKey, id, photoBytes('Canon_40D.jpg'))).statusCode).toBe(201);

  // A's vehicle learns the id is not A's at its own look (within the 30 s backstop) and fails, named.
  await expect.poll(async () => (await get(a.liveKey, `/v1/batches/${batch.id}`)).status, { timeout: 60_000, interval: 250 }).toBe('completed');
  const [item] = (await get(a.liveKey, `/v1/batches/${batch.id}/items`)).items;
  expect(item).toMatchObject({ source: 'van', status: 'failed', creditsCharged: 0, error: { code: 'NOT_FOUND' } });
  expect(await getBalance(p.db, a.userId)).toMatchObject({ community: 5, reserved: 0 });
  expect(await waitRows(batch.id)).toBe(0);

  // Nothing B did reached A's batch workflow.
  const history = await p.temporal.workflow.getHandle(`batch:${a.userId}:${batch.id}`).fetchHistory();
  const signals = (history.events ?? []).flatMap((e) => (e.workflowExecutionSignaledEventAttributes ? [e.workflowExecutionSignaledEventAttributes.signalName] : []));
  expect(signals).toEqual([]);
}, 120_000);
