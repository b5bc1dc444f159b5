import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyCache } from '../../auth/cache.ts';
import { ensurePersonalWorkspace } from '../../accounts/workspaces.ts';
import { signalUploadWaiters } from '../../batches/upload-waits.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { freePort } from '../../tools/scripts/temporal.ts';
import { createUploads } from '../../uploads/service.ts';
import { trySessionLock } from '../../db/session-lock.ts';
import { buildWebApp } from '../../web/app.ts';
import { createConsoleAuth } from '../../web/auth.ts';
import { smtpMailer, startMailCatcher, type MailCatcher } from '../../web/mail.ts';
import { expectEnvelope } from '../helpers/app.ts';
import { noRateLimits } from '../helpers/deps.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { testConfig } from '../harness/env.ts';

/**
 * A console batch sent again after its answer was lost (docs/decisions.md, "Console batches: one
 * request id, one batch"). Before: the console's batch route knew no request id; the first
 * submission made the batch and took its uploads, so the resend a person's browser (or the chaos
 * run's console client) made after a dropped connection was refused 400 "taken by another batch",
 * though the batch ran and was billed. Now the browser sends an x-request-id with each submission
 * and the same id gets the batch it made.
 */
let p: Pipeline;
let web: FastifyInstance;
let url: string;
let mail: MailCatcher;
let closeMailer: () => void;

beforeAll(async () => {
  // No worker: the batches are stored and started, none of their photos runs.
  p = await startPipeline({ worker: false });
  const blobs = new FsBlobStore(p.config.BLOB_DIR);
  mail = await startMailCatcher();
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const config = testConfig({ WEB_PORT: port, WEB_URL: url, SMTP_URL: mail.url, AUTH_SECRET: 'test-auth-secret-0123456789abcdef0123456789' });
  const mailer = smtpMailer(mail.url, config.MAIL_FROM);
  closeMailer = () => mailer.close();
  const auth = createConsoleAuth({ config, pool: p.db, mailer, onEmailVerified: async (u) => void (await ensurePersonalWorkspace(p.db, { id: u.id, email: u.email })) });
  const uploads = createUploads({ db: p.db, blobs, config: p.config, onSettled: signalUploadWaiters({ db: p.db, temporal: p.temporal }) });
  web = await buildWebApp({ config, db: p.db, auth, mailer, keyCache: new KeyCache(), limiter: noRateLimits, batches: { pipeline: { config: p.config, db: p.db, blobs, temporal: p.temporal, fetchPolicy: PUBLIC_INTERNET, uploads, metrics: createApiMetrics() } } });
  await web.listen({ host: '127.0.0.1', port });
}, 120_000);
afterAll(async () => {
  await web?.close();
  closeMailer?.();
  await mail?.close();
  await p?.close();
});

interface Person {
  cookie: string;
  workspaceId: string;
}

/** A person signed in by a mailed link, with their personal workspace (its sign-up credits). */
async function person(): Promise<Person> {
  const email = `resend-${randomBytes(5).toString('hex')}@example.test`;
  const asked = await fetch(`${url}/api/v1/auth/sign-in/magic-link`, { method: 'POST', headers: { origin: url, 'content-type': 'application/json' }, body: JSON.stringify({ email, callbackURL: '/' }) });
  expect(asked.status, await asked.clone().text()).toBe(200);
  const sent = await mail.waitFor((m) => m.to.includes(email) && m.subject === 'Your Lenstack sign-in link');
  const verified = await fetch(/https?:\/\/\S+/.exec(sent.text)![0], { redirect: 'manual' });
  const cookie = verified.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const session = (await (await fetch(`${url}/api/v1/session`, { headers: { cookie } })).json()) as { workspaces: Array<{ id: string; kind: string }> };
  return { cookie, workspaceId: session.workspaces.find((w) => w.kind === 'personal')!.id };
}

/** A finished console upload of the photo into the person's workspace: its id. */
async function upload(who: Person, photo: Buffer): Promise<string> {
  const tus = { cookie: who.cookie, origin: url, 'tus-resumable': '1.0.0' };
  const created = await fetch(`${url}/api/v1/uploads`, {
    method: 'POST',
    headers: { ...tus, 'upload-length': String(photo.length), 'upload-metadata': `workspace ${Buffer.from(who.workspaceId).toString('base64')}` },
  });
  expect(created.status).toBe(201);
  const location = new URL(created.headers.get('location')!, url);
  const sent = await fetch(location, { method: 'PATCH', headers: { ...tus, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, body: photo });
  expect(sent.status).toBe(204);
  return location.pathname.split('/').pop()!;
}

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
