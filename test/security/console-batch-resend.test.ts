import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trySessionLock } from '../../db/session-lock.ts';
import { expectEnvelope } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startConsoleOverHttp, uploadThroughConsole, type ConsoleOverHttp } from '../web/console-http.ts';

/**
 * A console batch sent again after its answer was lost (docs/decisions.md, "Console batches: one
 * request id, one batch"). Before: the console's batch route knew no request id; the first
 * submission made the batch and took its uploads, so the resend a person's browser (or the chaos
 * run's console client) made after a dropped connection was refused 400 "taken by another batch",
 * though the batch ran and was billed. Now the browser sends an x-request-id with each submission
 * and the same id gets the batch it made.
 */
let p: Pipeline;
let web: ConsoleOverHttp;
let url: string;

beforeAll(async () => {
  // No worker: the batches are stored and started, none of their photos runs.
  p = await startPipeline({ worker: false });
  web = await startConsoleOverHttp(p, { batches: true });
  url = web.url;
}, 120_000);
afterAll(async () => {
  await web?.close();
  await p?.close();
});

type Person = Awaited<ReturnType<ConsoleOverHttp['signIn']>>;

/** A person signed in by a mailed link, with their personal workspace (its sign-up credits). */
const person = () => web.signIn(`resend-${randomBytes(5).toString('hex')}@example.test`);

/** A finished console upload of the photo into the person's workspace: its id. */
const upload = (who: Person, photo: Buffer) => uploadThroughConsole(url, who, who.workspaceId, photo);

const submit = (who: Person, body: unknown, requestId?: string) =>
  fetch(`${url}/api/v1/workspaces/${who.workspaceId}/batches`, {
    method: 'POST',
    headers: { cookie: who.cookie, origin: url, 'content-type': 'application/json', ...(requestId ? { 'x-request-id': requestId } : {}) },
    body: JSON.stringify(body),
  });

const batchesOf = async (who: Person) => (await p.db.query<{ id: string }>('SELECT id FROM batches WHERE user_id = $1 ORDER BY created_at', [who.workspaceId])).rows.map((r) => r.id);

describe('a console batch sent again under its x-request-id', () => {
  it('after a lost answer gets the batch the first made (202, the same id), not a 400 and not a second batch', async () => {
    const who = await person();
    const id = await upload(who, photoBytes('Nikon_D70.jpg'));
    const body = { preset: 'quick-scan', uploads: [{ id, name: 'nikon.jpg' }] };
    const requestId = `console-${randomBytes(8).toString('hex')}`;
    const first = await submit(who, body, requestId);
    expect(first.status, await first.clone().text()).toBe(202);
    const made = ((await first.json()) as { id: string }).id;
    // The answer never reached the browser: it sends the same submission again.
    const again = await submit(who, body, requestId);
    expect(again.status, await again.clone().text()).toBe(202);
    expect(((await again.json()) as { id: string; counts: { total: number } })).toMatchObject({ id: made, counts: { total: 1 } });
    expect(await batchesOf(who)).toEqual([made]);
    // Without its id, the resend is what it always was: the upload is the batch's now.
    const bare = await submit(who, body);
    expect(bare.status).toBe(400);
    expect(expectEnvelope(await bare.json()).message).toMatch(/no upload .* of yours in this workspace/);
    expect(await batchesOf(who)).toEqual([made]);
  }, 60_000);

  it('with another body is 409 REQUEST_ID_CONFLICT and changes nothing', async () => {
    const who = await person();
    const [a, b] = [await upload(who, photoBytes('Nikon_D70.jpg')), await upload(who, photoBytes('Canon_40D.jpg'))];
    const requestId = `console-${randomBytes(8).toString('hex')}`;
    const first = await submit(who, { preset: 'quick-scan', uploads: [{ id: a, name: 'a.jpg' }] }, requestId);
    expect(first.status, await first.clone().text()).toBe(202);
    const other = await submit(who, { preset: 'quick-scan', uploads: [{ id: b, name: 'b.jpg' }] }, requestId);
    expect(other.status).toBe(409);
    expect(expectEnvelope(await other.json()).code).toBe('REQUEST_ID_CONFLICT');
    // The second upload was neither claimed nor taken: still the person's, free to use.
    expect((await p.db.query('SELECT taken_at FROM uploads WHERE id = $1', [b])).rows).toEqual([{ taken_at: null }]);
    expect(await batchesOf(who)).toHaveLength(1);
  }, 60_000);

  it('sent twice at once makes one batch, and each answer is that batch or a 503 to come back for it', async () => {
    const who = await person();
    const ids = [await upload(who, photoBytes('Nikon_D70.jpg')), await upload(who, photoBytes('Canon_40D.jpg'))];
    const body = { preset: 'quick-scan', uploads: ids.map((id, k) => ({ id, name: `p${k}.jpg` })) };
    const requestId = `console-${randomBytes(8).toString('hex')}`;
    const answers = await Promise.all([submit(who, body, requestId), submit(who, body, requestId)]);
    const made = await batchesOf(who);
    expect(made).toHaveLength(1);
    for (const r of answers) {
      expect([202, 503], await r.clone().text()).toContain(r.status);
      if (r.status === 202) expect(((await r.json()) as { id: string }).id).toBe(made[0]);
      else expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
    }
    // Asked again, it is that batch; the uploads are the batch's (their rows gone), whichever copy won.
    const later = await submit(who, body, requestId);
    expect(later.status, await later.clone().text()).toBe(202);
    expect(((await later.json()) as { id: string }).id).toBe(made[0]);
    expect((await p.db.query('SELECT id FROM uploads WHERE id = ANY($1)', [ids])).rowCount).toBe(0);
  }, 60_000);

  it('while its twin is still taking the photos in (in any console process) is 503 with Retry-After, claiming nothing and running no second intake', async () => {
    const who = await person();
    const id = await upload(who, photoBytes('Nikon_D70.jpg'));
    const body = { preset: 'quick-scan', uploads: [{ id, name: 'nikon.jpg' }] };
    const requestId = `console-${randomBytes(8).toString('hex')}`;
    // The twin: the lock a submission under this id holds while it runs, taken here as another process would.
    const twin = await trySessionLock(p.config.DATABASE_URL, `console-batch:${who.workspaceId}:${requestId}`);
    expect(twin).not.toBeNull();
    try {
      const second = await submit(who, body, requestId);
      expect(second.status, await second.clone().text()).toBe(503);
      expect(second.headers.get('retry-after')).toBe('2');
      expect(expectEnvelope(await second.json())).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true });
      // Not claimed, not taken in: the upload is as it was, no photo stored for the workspace, no batch.
      expect((await p.db.query('SELECT taken_at, taken_by FROM uploads WHERE id = $1', [id])).rows).toEqual([{ taken_at: null, taken_by: null }]);
      expect((await p.db.query('SELECT 1 FROM photos WHERE user_id = $1', [who.workspaceId])).rowCount).toBe(0);
      expect(await batchesOf(who)).toEqual([]);
    } finally {
      await twin!.release();
    }
    // The twin gone (its session ended), the same submission goes through.
    const after = await submit(who, body, requestId);
    expect(after.status, await after.clone().text()).toBe(202);
    expect(await batchesOf(who)).toEqual([((await after.json()) as { id: string }).id]);
  }, 60_000);

  it('whose first attempt died holding the uploads (its process killed mid-intake) takes them again; another submission still cannot', async () => {
    const who = await person();
    const id = await upload(who, photoBytes('Nikon_D70.jpg'));
    const body = { preset: 'quick-scan', uploads: [{ id, name: 'nikon.jpg' }] };
    const requestId = `console-${randomBytes(8).toString('hex')}`;
    // What a SIGKILL between the claim and the batch leaves: the upload claimed under the id, no batch.
    await p.db.query('UPDATE uploads SET taken_at = now(), taken_by = $2 WHERE id = $1', [id, requestId]);
    const stranger = await submit(who, body, `console-${randomBytes(8).toString('hex')}`);
    expect(stranger.status).toBe(400);
    expect(await batchesOf(who)).toEqual([]);
    const again = await submit(who, body, requestId);
    expect(again.status, await again.clone().text()).toBe(202);
    expect(await batchesOf(who)).toEqual([((await again.json()) as { id: string }).id]);
    expect((await p.db.query('SELECT 1 FROM uploads WHERE id = $1', [id])).rowCount).toBe(0);
  }, 60_000);
});
