import { createHash, randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { checkInvariants, getBalance, grant } from '../../credits/ledger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { collectBlobs } from '../../worker/blob-collector.ts';
import { bearer } from '../helpers/app.ts';
import type { Browser } from 'playwright-core';
import { seriousA11yViolations } from './browser.ts';
import { consoleSuite, type ConsoleStack } from './console-stack.ts';
import { browserCookies, consoleCall, emailMaker, joinWorkspace, type Person, signUpOverHttp } from './people.ts';

/**
 * Erasure from the console (docs/privacy.md): an owner deletes a team workspace by typing its
 * name, a person deletes their account, an owner sets how long original bytes are kept. Through
 * HTTP against the real console and API, with a worker, Temporal and the blob store.
 */
let stack: ConsoleStack;
let blobs: FsBlobStore;
let browser: Browser;
consoleSuite((s, b) => {
  [stack, browser] = [s, b];
  blobs = new FsBlobStore(stack.pipeline.config.BLOB_DIR);
});

const newEmail = emailMaker('erase');
const db = () => stack.pipeline.db;
const api = () => stack.pipeline.app;
async function json<T>(res: Response): Promise<T> {
  return (await res.json()) as T;
}
async function noiseJpeg(): Promise<Buffer> {
  return sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
}
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const analyze = (key: string, img: Buffer, modules = ['dating']) =>
  api().inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: img.toString('base64'), modules } });
async function liveKey(person: Person, workspaceId: string): Promise<string> {
  const res = await consoleCall(stack, person, 'POST', `/api/v1/workspaces/${workspaceId}/keys`, { kind: 'live', name: 'prod' });
  expect(res.status).toBe(201);
  return (await json<{ key: string }>(res)).key;
}
const count = async (sql: string, params: unknown[]) => (await db().query<{ n: number }>(sql, params)).rows[0]!.n;
const ledgerOk = async (accountId: string) => expect(await checkInvariants(db(), accountId)).toEqual([{ userId: accountId, ok: true, problems: [] }]);
const workspacesOf = async (person: Person) => (await json<{ workspaces: Array<{ id: string }> }>(await consoleCall(stack, person, 'GET', '/api/v1/session'))).workspaces.map((w) => w.id);

describe('deleting a workspace', () => {
  it('erases photos, blobs, keys, members, uploads and batches; keeps the ledger balanced without its notes; a run in flight ends uncharged', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const member = await signUpOverHttp(stack, newEmail());
    const ws = (await json<{ id: string }>(await consoleCall(stack, owner, 'POST', '/api/v1/workspaces', { name: 'Acme Photos' }))).id;
    await joinWorkspace(stack, owner, ws, member, 'member');
    await grant(db(), { accountId: ws, pool: 'purchased', amount: 100, idempotencyKey: 'test-grant', note: 'goodwill for Jane Doe, photo of her house' });
    const key = await liveKey(owner, ws);
    const personalKey = await liveKey(owner, owner.workspaceId);

    // Its own photo, one it shares with the owner's personal workspace, a batch, an upload.
    const own = await noiseJpeg();
    const shared = await noiseJpeg();
    const inflight = await noiseJpeg();
    for (const [k, img] of [[key, own], [key, shared], [personalKey, shared]] as const) expect((await analyze(k, img)).statusCode).toBe(200);
    const batch = await api().inject({ method: 'POST', url: '/v1/batches', headers: bearer(key), payload: { modules: ['dating'], items: [{ base64: own.toString('base64'), name: 'Jane at home.jpg' }] } });
    expect(batch.statusCode, batch.body).toBe(202);
    await expect.poll(async () => (await api().inject({ method: 'GET', url: `/v1/batches/${batch.json().id}`, headers: bearer(key) })).json().status, { timeout: 90_000, interval: 200 }).toBe('completed');
    const upload = await api().inject({ method: 'POST', url: '/v1/uploads', headers: { ...bearer(key), 'tus-resumable': '1.0.0', 'upload-length': '1000' } });
    expect(upload.statusCode, upload.body).toBe(201);

    // Refusals first: each changes nothing.
    const wrongName = await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${ws}`, { confirm: 'acme photos' });
    expect(wrongName.status).toBe(400);
    expect((await json<{ error: { code: string } }>(wrongName)).error.code).toBe('VALIDATION_FAILED');
    const byMember = await consoleCall(stack, member, 'DELETE', `/api/v1/workspaces/${ws}`, { confirm: 'Acme Photos' });
    expect(byMember.status).toBe(403);
    const outsider = await signUpOverHttp(stack, newEmail());
    expect((await consoleCall(stack, outsider, 'DELETE', `/api/v1/workspaces/${ws}`, { confirm: 'Acme Photos' })).status).toBe(404);
    expect((await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${owner.workspaceId}`, { confirm: owner.email })).status).toBe(403);
    expect((await api().inject({ method: 'GET', url: '/v1/usage', headers: bearer(key) })).statusCode).toBe(200);
    expect(await count('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [ws])).toBe(2);

    // A run of the workspace in flight at the vendor while it is deleted.
    stack.pipeline.sim.hold();
    let running: ReturnType<typeof analyze> | undefined;
    let ledgerBefore: Array<{ kind: string; delta: string }> = [];
    try {
      running = analyze(key, inflight, ['dating', 'describe']);
      await expect.poll(() => stack.pipeline.sim.held(), { timeout: 60_000, interval: 20 }).toBeGreaterThan(0);
      await expect.poll(async () => (await getBalance(db(), ws)).reserved, { timeout: 30_000 }).toBeGreaterThan(0);
      ledgerBefore = (await db().query<{ kind: string; delta: string }>('SELECT kind, (community_delta + purchased_delta + reserved_delta + charged_delta)::text AS delta FROM credit_ledger WHERE user_id = $1 ORDER BY id', [ws])).rows;

      const res = await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${ws}`, { confirm: 'Acme Photos' });
      const body = await res.text();
      expect(res.status, body).toBe(200);
      const { erased } = JSON.parse(body) as { erased: Record<string, number> };
      expect(erased).toMatchObject({ workspaceId: ws, photos: 2, keysRevoked: 1, batches: 1, reservationsReleased: 1 });
      expect(erased.workflowsTerminated).toBeGreaterThanOrEqual(1);
    } finally {
      stack.pipeline.sim.release();
      stack.pipeline.sim.reset();
    }
    // The run ends with an error answer, not a crash and not a charge.
    const ended = await running!;
    expect(ended.statusCode).toBeGreaterThanOrEqual(400);
    expect(ended.json().error.code).toEqual(expect.any(String));

    // Keys: refused at once. Members: nobody sees it. Registry, batches, uploads: gone.
    expect((await api().inject({ method: 'GET', url: '/v1/usage', headers: bearer(key) })).statusCode).toBe(401);
    expect(await workspacesOf(owner)).not.toContain(ws);
    expect(await workspacesOf(member)).not.toContain(ws);
    for (const table of ['photos', 'lens_records', 'lens_events', 'batches', 'uploads', 'api_keys', 'analysis_requests', 'vehicle_reports']) {
      expect(await count(`SELECT count(*)::int AS n FROM ${table} WHERE user_id = $1`, [ws]), table).toBe(0);
    }
    expect(await count('SELECT count(*)::int AS n FROM workspace_members WHERE workspace_id = $1', [ws])).toBe(0);
    // Blobs: its own photo's bytes are gone; the shared one stays for the personal workspace.
    expect(await blobs.has(sha(own))).toBe(false);
    expect(await blobs.has(sha(shared))).toBe(true);
    expect((await api().inject({ method: 'GET', url: `/v2/lookup?sha256=${sha(shared)}`, headers: bearer(personalKey) })).json().results[sha(shared)].matchType).toBe('exact');

    // The ledger: rows kept (amounts, kinds), notes erased, nothing charged for the killed run, balanced.
    const rows = await db().query<{ kind: string; note: string | null; delta: string }>('SELECT kind, note, (community_delta + purchased_delta + reserved_delta + charged_delta)::text AS delta FROM credit_ledger WHERE user_id = $1 ORDER BY id', [ws]);
    // Every row is still there with its amounts; the erasure added one: the release of the killed run's hold.
    expect(rows.rows.slice(0, ledgerBefore.length).map(({ kind, delta }) => ({ kind, delta }))).toEqual(ledgerBefore);
    expect(rows.rows.slice(ledgerBefore.length).map((r) => r.kind)).toEqual(['release']);
    expect(ledgerBefore[0]!.kind).toBe('grant');
    expect(JSON.stringify(rows.rows)).not.toContain('Jane');
    expect(rows.rows.filter((r) => r.note !== null).every((r) => r.note === '[erased]')).toBe(true);
    const users = await db().query<{ email: string; name: string | null; deleted_at: Date | null }>('SELECT email, name, deleted_at FROM users WHERE id = $1', [ws]);
    expect(users.rows[0]).toMatchObject({ email: `erased+${ws}@erased.invalid`, name: null, deleted_at: expect.any(Date) });
    const balance = await getBalance(db(), ws);
    expect(balance.reserved).toBe(0);
    await ledgerOk(ws);
    // The ledger stays append-only for everything but erased notes.
    await expect(db().query(`UPDATE credit_ledger SET charged_delta = 0 WHERE user_id = $1`, [ws])).rejects.toThrow(/append-only/);
    await expect(db().query(`UPDATE credit_ledger SET note = 'changed' WHERE user_id = $1`, [ws])).rejects.toThrow(/append-only/);

    // The worker carries on: the personal workspace analyzes as before.
    expect((await analyze(personalKey, await noiseJpeg())).statusCode).toBe(200);
    // Deleting again: it is not there any more.
    expect((await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${ws}`, { confirm: 'Acme Photos' })).status).toBe(404);
  }, 240_000);
});

describe('deleting an account', () => {
  it('is refused while the person solely owns a team workspace; then erases them and their personal workspace', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const other = await signUpOverHttp(stack, newEmail());
    const solo = (await json<{ id: string }>(await consoleCall(stack, person, 'POST', '/api/v1/workspaces', { name: 'Solo Studio' }))).id;
    const shared = (await json<{ id: string }>(await consoleCall(stack, other, 'POST', '/api/v1/workspaces', { name: 'Shared Lab' }))).id;
    await joinWorkspace(stack, other, shared, person, 'admin');
    const personalKey = await liveKey(person, person.workspaceId);
    const sharedKey = await liveKey(person, shared);
    const img = await noiseJpeg();
    expect((await analyze(personalKey, img)).statusCode).toBe(200);

    const refused = await consoleCall(stack, person, 'DELETE', '/api/v1/account', { confirm: person.email });
    expect(refused.status).toBe(403);
    expect((await json<{ error: { message: string } }>(refused)).error.message).toContain('Solo Studio');
    expect((await consoleCall(stack, person, 'DELETE', `/api/v1/workspaces/${solo}`, { confirm: 'Solo Studio' })).status).toBe(200);
    expect((await consoleCall(stack, person, 'DELETE', '/api/v1/account', { confirm: 'someone@else.test' })).status).toBe(400);
    expect((await consoleCall(stack, person, 'GET', '/api/v1/session')).status).toBe(200);

    const res = await consoleCall(stack, person, 'DELETE', '/api/v1/account', { confirm: person.email.toUpperCase() });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await json(res)).toEqual({ deleted: true, workspacesErased: [person.workspaceId] });
    // Signed out everywhere, unknown to the console; personal workspace erased; shared one kept without them or their key.
    expect((await consoleCall(stack, person, 'GET', '/api/v1/session')).status).toBe(401);
    expect(await count('SELECT count(*)::int AS n FROM console_users WHERE lower(email) = lower($1)', [person.email])).toBe(0);
    expect(await count('SELECT count(*)::int AS n FROM users WHERE lower(email) = lower($1)', [person.email])).toBe(0);
    expect(await count('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [person.workspaceId])).toBe(0);
    expect(await blobs.has(sha(img))).toBe(false);
    expect((await api().inject({ method: 'GET', url: '/v1/usage', headers: bearer(personalKey) })).statusCode).toBe(401);
    expect((await api().inject({ method: 'GET', url: '/v1/usage', headers: bearer(sharedKey) })).statusCode).toBe(401);
    expect(await workspacesOf(other)).toContain(shared);
    await ledgerOk(person.workspaceId);
  }, 180_000);
});

describe('retention', () => {
  it('an owner sets how long original bytes are kept; the collector deletes older ones and keeps the lens records', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const member = await signUpOverHttp(stack, newEmail());
    const ws = (await json<{ id: string }>(await consoleCall(stack, owner, 'POST', '/api/v1/workspaces', { name: 'Archive' }))).id;
    await joinWorkspace(stack, owner, ws, member, 'member');
    await grant(db(), { accountId: ws, pool: 'purchased', amount: 10, idempotencyKey: 'test-grant' });
    const key = await liveKey(owner, ws);
    const settings = `/api/v1/workspaces/${ws}/settings`;
    expect(await json(await consoleCall(stack, member, 'GET', settings))).toEqual({ retentionDays: null });
    expect((await consoleCall(stack, member, 'PATCH', settings, { retentionDays: 30 })).status).toBe(403);
    for (const bad of [0, 3651, 1.5, '30', -1]) expect((await consoleCall(stack, owner, 'PATCH', settings, { retentionDays: bad })).status, String(bad)).toBe(400);
    expect(await json(await consoleCall(stack, owner, 'PATCH', settings, { retentionDays: 30 }))).toEqual({ retentionDays: 30 });

    const old = await noiseJpeg();
    const recent = await noiseJpeg();
    for (const img of [old, recent]) expect((await analyze(key, img)).statusCode).toBe(200);
    // The old photo was last sent 31 days ago (its blob too: older than the collector's grace).
    await db().query(`UPDATE photos SET last_analyzed_at = now() - interval '31 days' WHERE user_id = $1 AND sha256 = $2`, [ws, sha(old)]);
    const { utimes } = await import('node:fs/promises');
    const past = new Date(Date.now() - 31 * 86400_000);
    for (const img of [old, recent]) await utimes(blobs.pathOf(sha(img)), past, past);
    await collectBlobs(db(), blobs, { graceMs: 3600_000 });
    expect(await blobs.has(sha(old))).toBe(false);
    expect(await blobs.has(sha(recent))).toBe(true);
    // Lens records stay: lookup by hash still answers, and a new analysis of other lenses needs the photo again.
    const found = (await api().inject({ method: 'GET', url: `/v2/lookup?sha256=${sha(old)}`, headers: bearer(key) })).json().results[sha(old)];
    expect(found).toMatchObject({ matchType: 'exact', photo: { lenses: { dating: expect.any(Object) } } });
    // Sent again, the bytes are stored again and the cached lens is free.
    const again = await analyze(key, old);
    expect(again.statusCode).toBe(200);
    expect(again.json().usage.creditsCharged).toBe(0);
    expect(await blobs.has(sha(old))).toBe(true);
    // Back to keeping them: null.
    expect(await json(await consoleCall(stack, owner, 'PATCH', settings, { retentionDays: null }))).toEqual({ retentionDays: null });
  }, 180_000);
});

describe('in the console (Chromium)', () => {
  it('an owner deletes a team workspace by typing its name; a person deletes their account by typing their address', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const ws = (await json<{ id: string }>(await consoleCall(stack, owner, 'POST', '/api/v1/workspaces', { name: 'Harbour Survey' }))).id;
    const key = await liveKey(owner, ws);
    expect((await analyze(key, await noiseJpeg())).statusCode).toBe(402); // no credits: nothing to erase but keys and the workspace
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await ctx.addCookies(browserCookies(stack, owner));
    const page = await ctx.newPage();
    try {
      await page.goto(`${stack.url}/settings`);
      await page.getByLabel('Workspace', { exact: true }).selectOption({ label: 'Harbour Survey (owner)' });
      const form = page.getByRole('form', { name: 'Delete Harbour Survey' });
      const button = form.getByRole('button', { name: 'Delete workspace' });
      await form.getByLabel('Type Harbour Survey to confirm').fill('Harbour');
      expect(await button.isDisabled()).toBe(true);
      await form.getByLabel('Type Harbour Survey to confirm').fill('Harbour Survey');
      expect(await seriousA11yViolations(page)).toEqual([]);
      await button.click();
      // Back on the remaining (personal) workspace: the deleted one is no longer offered.
      await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), { timeout: 15_000 }).toBe(owner.email);
      expect(await page.getByLabel('Workspace', { exact: true }).count()).toBe(0);
      expect((await api().inject({ method: 'GET', url: '/v1/usage', headers: bearer(key) })).statusCode).toBe(401);
      expect(await count('SELECT count(*)::int AS n FROM users WHERE id = $1 AND deleted_at IS NOT NULL', [ws])).toBe(1);
      // The personal workspace has no delete form: it goes with the account.
      expect(await page.getByRole('form', { name: /^Delete / }).count()).toBe(0);

      await page.getByRole('link', { name: 'Account' }).click();
      const account = page.getByRole('form', { name: 'Delete account' });
      await account.getByLabel(`Type ${owner.email} to confirm`).fill(owner.email);
      await account.getByRole('button', { name: 'Delete my account' }).click();
      await page.waitForURL(/\/sign-in/, { timeout: 15_000 });
      expect(await count('SELECT count(*)::int AS n FROM console_users WHERE lower(email) = lower($1)', [owner.email])).toBe(0);
      expect((await consoleCall(stack, owner, 'GET', '/api/v1/session')).status).toBe(401);
    } finally {
      await ctx.close();
    }
  }, 180_000);
});
