import type { Browser } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { bearer } from '../helpers/app.ts';
import { screenshot, seriousA11yViolations } from './browser.ts';
import { consoleSuite, type ConsoleStack } from './console-stack.ts';
import { browserCookies, consoleCall, emailMaker, joinWorkspace, type Person, signUpOverHttp } from './people.ts';

/**
 * Finishing the team (issue 21): remove a member, change a role, hand over ownership, leave — with
 * the last owner protected, the removed person's access gone at once, and the keys they made kept
 * or revoked as the remover says. Through HTTP against the real console, and in Chromium for the
 * owner's path.
 */
let stack: ConsoleStack;
let browser: Browser;
consoleSuite((s, b) => void ([stack, browser] = [s, b]));

const newEmail = emailMaker('team');
const db = () => stack.pipeline.db;
/** Pages under a loaded 2-core machine: a correctness wait, not a speed target. */
const soon = { timeout: 15_000 };

async function json<T>(res: Response): Promise<T> {
  return (await res.json()) as T;
}

const join = (owner: Person, workspaceId: string, person: Person, role: 'admin' | 'member') => joinWorkspace(stack, owner, workspaceId, person, role);

async function team(): Promise<{ owner: Person; admin: Person; member: Person; ws: string }> {
  const [owner, admin, member] = [await signUpOverHttp(stack, newEmail()), await signUpOverHttp(stack, newEmail()), await signUpOverHttp(stack, newEmail())];
  const created = await consoleCall(stack, owner, 'POST', '/api/v1/workspaces', { name: 'Fleet Ops' });
  const ws = (await json<{ id: string }>(created)).id;
  await join(owner, ws, admin, 'admin');
  await join(owner, ws, member, 'member');
  return { owner, admin, member, ws };
}

const roleOf = async (ws: string, person: Person) =>
  (await db().query<{ role: string }>('SELECT m.role FROM workspace_members m JOIN console_users p ON p.id = m.console_user_id WHERE m.workspace_id = $1 AND p.email = $2', [ws, person.email])).rows[0]?.role ?? null;
const idOf = async (person: Person) => (await db().query<{ id: string }>('SELECT id FROM console_users WHERE email = $1', [person.email])).rows[0]!.id;
const keyWorks = async (key: string) => (await stack.pipeline.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(key) })).statusCode;

describe('who may do what', () => {
  it('members only leave; admins remove members only; roles change by an owner only', async () => {
    const { owner, admin, member, ws } = await team();
    const [ownerId, adminId, memberId] = [await idOf(owner), await idOf(admin), await idOf(member)];
    const refused = async (who: Person, method: string, path: string, body?: unknown) => {
      const res = await consoleCall(stack, who, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect((await json<{ error: { code: string } }>(res)).error.code).toBe('FORBIDDEN');
    };
    await refused(member, 'DELETE', `/api/v1/workspaces/${ws}/members/${adminId}`, { keys: 'keep' });
    await refused(member, 'PATCH', `/api/v1/workspaces/${ws}/members/${memberId}`, { role: 'admin' });
    await refused(admin, 'DELETE', `/api/v1/workspaces/${ws}/members/${ownerId}`, { keys: 'keep' });
    await refused(admin, 'PATCH', `/api/v1/workspaces/${ws}/members/${adminId}`, { role: 'owner' });
    await refused(admin, 'PATCH', `/api/v1/workspaces/${ws}/members/${memberId}`, { role: 'admin' });
    await refused(admin, 'POST', `/api/v1/workspaces/${ws}/owner`, { personId: adminId });
    expect([await roleOf(ws, owner), await roleOf(ws, admin), await roleOf(ws, member)]).toEqual(['owner', 'admin', 'member']);

    // The removal must say what becomes of the person's keys.
    const unsaid = await consoleCall(stack, admin, 'DELETE', `/api/v1/workspaces/${ws}/members/${memberId}`, {});
    expect(unsaid.status).toBe(400);
    expect((await json<{ error: { message: string } }>(unsaid)).error.message).toContain('keys');
    expect(await roleOf(ws, member)).toBe('member');
    // Bad ids are 404 in the envelope, never 500; another workspace's people are not reachable.
    expect((await consoleCall(stack, owner, 'PATCH', `/api/v1/workspaces/${ws}/members/cu_nobody`, { role: 'admin' })).status).toBe(404);
    expect((await consoleCall(stack, owner, 'PATCH', `/api/v1/workspaces/${ws}/members/${memberId}`, { role: 'emperor' })).status).toBe(400);
    expect((await consoleCall(stack, member, 'PATCH', `/api/v1/workspaces/${owner.workspaceId}/members/${ownerId}`, { role: 'member' })).status).toBe(404);

    const removed = await consoleCall(stack, admin, 'DELETE', `/api/v1/workspaces/${ws}/members/${memberId}`, { keys: 'keep' });
    expect(removed.status).toBe(200);
    expect(await roleOf(ws, member)).toBeNull();
    const promoted = await consoleCall(stack, owner, 'PATCH', `/api/v1/workspaces/${ws}/members/${adminId}`, { role: 'member' });
    expect(await json(promoted)).toEqual({ member: { personId: adminId, role: 'member' } });
    expect(await roleOf(ws, admin)).toBe('member');
  });

  it('the last owner cannot leave, be demoted or removed; after a transfer the old owner is an admin and may leave', async () => {
    const { owner, admin, ws } = await team();
    const [ownerId, adminId] = [await idOf(owner), await idOf(admin)];
    for (const [method, path, body] of [
      ['DELETE', `/api/v1/workspaces/${ws}/members/me`, undefined],
      ['DELETE', `/api/v1/workspaces/${ws}/members/${ownerId}`, { keys: 'keep' }],
      ['PATCH', `/api/v1/workspaces/${ws}/members/${ownerId}`, { role: 'admin' }],
    ] as const) {
      const res = await consoleCall(stack, owner, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect((await json<{ error: { message: string } }>(res)).error.message).toContain('at least one owner');
    }
    // A personal workspace's only owner cannot leave it either; nor hand it over or share its
    // ownership (a person without their own workspace would get a new one, with new signup credits).
    expect((await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${owner.workspaceId}/members/me`)).status).toBe(403);
    await join(owner, owner.workspaceId, admin, 'admin');
    for (const [method, path, body] of [
      ['POST', `/api/v1/workspaces/${owner.workspaceId}/owner`, { personId: adminId }],
      ['PATCH', `/api/v1/workspaces/${owner.workspaceId}/members/${adminId}`, { role: 'owner' }],
    ] as const) {
      const res = await consoleCall(stack, owner, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect((await json<{ error: { message: string } }>(res)).error.message).toContain('personal workspace');
    }
    expect(await roleOf(owner.workspaceId, admin)).toBe('admin');
    expect((await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${owner.workspaceId}/members/${adminId}`, { keys: 'keep' })).status).toBe(200);
    expect(await roleOf(ws, owner)).toBe('owner');

    const transfer = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${ws}/owner`, { personId: adminId });
    expect(transfer.status).toBe(200);
    expect([await roleOf(ws, owner), await roleOf(ws, admin)]).toEqual(['admin', 'owner']);
    const left = await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${ws}/members/me`);
    expect(left.status).toBe(200);
    expect(await roleOf(ws, owner)).toBeNull();
    expect((await consoleCall(stack, owner, 'GET', `/api/v1/workspaces/${ws}/keys`)).status).toBe(404);
  });

  it('two owners demoting each other at once leave one owner, never none', async () => {
    const { owner, admin, ws } = await team();
    const [ownerId, adminId] = [await idOf(owner), await idOf(admin)];
    await consoleCall(stack, owner, 'PATCH', `/api/v1/workspaces/${ws}/members/${adminId}`, { role: 'owner' });
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all([
        consoleCall(stack, owner, 'PATCH', `/api/v1/workspaces/${ws}/members/${adminId}`, { role: 'member' }),
        consoleCall(stack, admin, 'PATCH', `/api/v1/workspaces/${ws}/members/${ownerId}`, { role: 'member' }),
      ]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 403]);
      const owners = await db().query(`SELECT 1 FROM workspace_members WHERE workspace_id = $1 AND role = 'owner'`, [ws]);
      expect(owners.rowCount).toBe(1);
      // Back to two owners for the next round (whoever is owner promotes the other).
      const survivor = (await roleOf(ws, owner)) === 'owner' ? owner : admin;
      const other = survivor === owner ? adminId : ownerId;
      expect((await consoleCall(stack, survivor, 'PATCH', `/api/v1/workspaces/${ws}/members/${other}`, { role: 'owner' })).status).toBe(200);
    }
  });
});

describe('removal', () => {
  it("takes the person's access at once, withdraws their invitations and uploads, and revokes or keeps their keys as asked", async () => {
    const { owner, admin, member, ws } = await team();
    const adminId = await idOf(admin);
    // The admin makes two keys, invites someone, and starts an upload.
    const k1 = await json<{ key: string; id: string }>(await consoleCall(stack, admin, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'test', name: 'admin one' }));
    const k2 = await json<{ key: string; id: string }>(await consoleCall(stack, admin, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'test', name: 'admin two' }));
    const ownKey = await json<{ key: string }>(await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'test', name: 'owner' }));
    expect([await keyWorks(k1.key), await keyWorks(k2.key), await keyWorks(ownKey.key)]).toEqual([200, 200, 200]);
    const accomplice = newEmail();
    expect((await consoleCall(stack, admin, 'POST', `/api/v1/workspaces/${ws}/invitations`, { email: accomplice, role: 'member' })).status).toBe(201);
    const upload = await fetch(`${stack.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { cookie: admin.cookie, origin: stack.url, 'tus-resumable': '1.0.0', 'upload-length': '1000', 'upload-metadata': `workspace ${Buffer.from(ws).toString('base64')}` },
    });
    expect(upload.status).toBe(201);
    const uploadAt = new URL(upload.headers.get('location')!, stack.url);

    // The list tells the owner what a removal would touch.
    const listed = await json<{ members: Array<{ personId: string; activeKeysCreated: number }> }>(await consoleCall(stack, owner, 'GET', `/api/v1/workspaces/${ws}/members`));
    expect(listed.members.find((m) => m.personId === adminId)?.activeKeysCreated).toBe(2);

    const removed = await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${ws}/members/${adminId}`, { keys: 'revoke' });
    expect(removed.status).toBe(200);
    expect(await json(removed)).toEqual({ removed: { personId: adminId, keysRevoked: [k1.id, k2.id], keysKept: [], invitationsWithdrawn: 1, uploadsDeleted: 1 } });

    // At once, with the same session: nothing of the workspace answers any more.
    for (const path of [`/api/v1/workspaces/${ws}/keys`, `/api/v1/workspaces/${ws}/credits`, `/api/v1/workspaces/${ws}/members`]) {
      expect((await consoleCall(stack, admin, 'GET', path)).status, path).toBe(404);
    }
    expect((await consoleCall(stack, admin, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'live' })).status).toBe(404);
    expect((await fetch(uploadAt, { method: 'HEAD', headers: { cookie: admin.cookie, 'tus-resumable': '1.0.0' } })).status).toBe(404);
    const session = await json<{ workspaces: Array<{ id: string }> }>(await consoleCall(stack, admin, 'GET', '/api/v1/session'));
    expect(session.workspaces.map((w) => w.id)).toEqual([admin.workspaceId]);
    // Their keys are refused by the API (evicted over Redis); the owner's key still works.
    await expect.poll(async () => [await keyWorks(k1.key), await keyWorks(k2.key)], { timeout: 5_000, interval: 50 }).toEqual([401, 401]);
    expect(await keyWorks(ownKey.key)).toBe(200);
    // The invitation they sent no longer works.
    const pending = await db().query('SELECT 1 FROM workspace_invitations WHERE workspace_id = $1 AND lower(email) = $2', [ws, accomplice]);
    expect(pending.rowCount).toBe(0);
    expect((await db().query('SELECT 1 FROM uploads WHERE user_id = $1 AND person_id IS NOT NULL', [ws])).rowCount).toBe(0);

    // "keep": the member's key (made while they were an admin) goes on working after they leave the workspace.
    const memberId = await idOf(member);
    await consoleCall(stack, owner, 'PATCH', `/api/v1/workspaces/${ws}/members/${memberId}`, { role: 'admin' });
    const kept = await json<{ key: string; id: string }>(await consoleCall(stack, member, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'test' }));
    const keep = await consoleCall(stack, owner, 'DELETE', `/api/v1/workspaces/${ws}/members/${memberId}`, { keys: 'keep' });
    expect((await json<{ removed: { keysKept: string[] } }>(keep)).removed.keysKept).toEqual([kept.id]);
    expect(await keyWorks(kept.key)).toBe(200);
    expect((await consoleCall(stack, member, 'GET', `/api/v1/workspaces/${ws}/keys`)).status).toBe(404);
  });
});

describe('leaving', () => {
  it("revokes the API keys the leaver made in that workspace (an admin about to be removed cannot leave first and keep them)", async () => {
    const { owner, admin, ws } = await team();
    const adminKey = await json<{ key: string; id: string }>(await consoleCall(stack, admin, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'test', name: 'admin ci' }));
    const ownerKey = await json<{ key: string }>(await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'test', name: 'owner ci' }));
    // A key the admin made in their own personal workspace is not this workspace's business.
    const personalKey = await json<{ key: string }>(await consoleCall(stack, admin, 'POST', `/api/v1/workspaces/${admin.workspaceId}/keys`, { kind: 'test', name: 'mine' }));
    expect(await keyWorks(adminKey.key)).toBe(200);

    const left = await consoleCall(stack, admin, 'DELETE', `/api/v1/workspaces/${ws}/members/me`);
    expect(left.status).toBe(200);
    const removed = (await json<{ removed: { keysRevoked: string[]; keysKept: string[] } }>(left)).removed;
    expect([removed.keysRevoked, removed.keysKept]).toEqual([[adminKey.id], []]);
    await expect.poll(async () => keyWorks(adminKey.key), { timeout: 5_000, interval: 50 }).toBe(401);
    expect(await keyWorks(ownerKey.key)).toBe(200);
    expect(await keyWorks(personalKey.key)).toBe(200);
    const row = await db().query<{ revoked: boolean }>('SELECT revoked_at IS NOT NULL AS revoked FROM api_keys WHERE id = $1', [adminKey.id]);
    expect(row.rows[0]!.revoked).toBe(true);
  });
});

describe('the cap on owned team workspaces', () => {
  it('holds for a transfer and for a promotion to owner: 403, nothing changed', async () => {
    const { owner, admin, ws } = await team();
    const adminId = await idOf(admin);
    // The admin already owns as many team workspaces as one person may.
    for (let i = 0; i < 10; i++) {
      expect((await consoleCall(stack, admin, 'POST', '/api/v1/workspaces', { name: `Own ${i}` })).status).toBe(201);
    }
    expect((await consoleCall(stack, admin, 'POST', '/api/v1/workspaces', { name: 'One more' })).status).toBe(403);

    for (const [method, path, body] of [
      ['POST', `/api/v1/workspaces/${ws}/owner`, { personId: adminId }],
      ['PATCH', `/api/v1/workspaces/${ws}/members/${adminId}`, { role: 'owner' }],
    ] as const) {
      const res = await consoleCall(stack, owner, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      const error = (await json<{ error: { code: string; message: string } }>(res)).error;
      expect(error.code).toBe('FORBIDDEN');
      expect(error.message).toContain('10 team workspaces');
    }
    expect([await roleOf(ws, owner), await roleOf(ws, admin)]).toEqual(['owner', 'admin']);
    // Below the cap the same transfer works (one of the admin's own workspaces is emptied here).
    const own = await db().query<{ workspace_id: string }>(
      `SELECT m.workspace_id FROM workspace_members m JOIN users u ON u.id = m.workspace_id WHERE m.console_user_id = $1 AND m.role = 'owner' AND u.kind = 'team' AND m.workspace_id <> $2 LIMIT 1`,
      [adminId, ws],
    );
    await db().query('DELETE FROM workspace_members WHERE workspace_id = $1', [own.rows[0]!.workspace_id]);
    expect((await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${ws}/owner`, { personId: adminId })).status).toBe(200);
    expect([await roleOf(ws, owner), await roleOf(ws, admin)]).toEqual(['admin', 'owner']);
  }, 60_000);
});

describe('in the browser', () => {
  it('an owner removes an admin and revokes their key; the admin, signed in elsewhere, loses the workspace; a member leaves', async () => {
    const { owner, admin, member, ws } = await team();
    const key = await json<{ key: string }>(await consoleCall(stack, admin, 'POST', `/api/v1/workspaces/${ws}/keys`, { kind: 'test', name: 'ci' }));

    const ownerCtx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const ownerCookie = browserCookies(stack, owner);
    await ownerCtx.addCookies(ownerCookie);
    const page = await ownerCtx.newPage();
    await page.goto(`${stack.url}/team`);
    await page.getByLabel('Workspace', { exact: true }).selectOption({ label: 'Fleet Ops (owner)' });
    await expect.poll(() => page.getByTestId('members').textContent(), soon).toContain(admin.email);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.getByRole('button', { name: `Remove ${admin.email}` }).click();
    expect(await page.getByText('They created 1 active key').isVisible()).toBe(true);
    await page.getByLabel(/Revoke them/).check();
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.getByRole('heading', { name: 'Members' }).scrollIntoViewIfNeeded();
    await screenshot(page, 'members');
    await page.getByRole('form', { name: `Remove ${admin.email}?` }).getByRole('button', { name: `Remove ${admin.email}` }).click();
    await expect.poll(() => page.getByRole('status').first().textContent(), soon).toContain('the keys they created are revoked');
    expect(await page.getByTestId('members').textContent()).not.toContain(admin.email);
    await expect.poll(async () => keyWorks(key.key), { timeout: 5_000, interval: 50 }).toBe(401);

    // The admin's own browser: the workspace is gone from the list, its routes 404.
    const adminCtx = await browser.newContext();
    await adminCtx.addCookies(browserCookies(stack, admin));
    const adminPage = await adminCtx.newPage();
    await adminPage.goto(stack.url);
    await expect.poll(() => adminPage.getByRole('heading', { level: 1 }).textContent(), soon).toBe(admin.email);
    expect(await adminPage.getByLabel('Workspace', { exact: true }).count()).toBe(0);

    // A member leaves from their own page.
    const memberCtx = await browser.newContext();
    await memberCtx.addCookies(browserCookies(stack, member));
    const memberPage = await memberCtx.newPage();
    await memberPage.goto(`${stack.url}/team`);
    await memberPage.getByLabel('Workspace', { exact: true }).selectOption({ label: 'Fleet Ops (member)' });
    await expect.poll(() => memberPage.getByTestId('members').textContent(), soon).toContain(owner.email);
    expect(await memberPage.getByRole('button', { name: /^Remove / }).count()).toBe(0);
    memberPage.once('dialog', (d) => void d.accept());
    await memberPage.getByRole('button', { name: 'Leave workspace' }).click();
    await expect.poll(() => memberPage.getByRole('heading', { level: 1 }).textContent(), soon).toBe(member.email);
    expect(await roleOf(ws, member)).toBeNull();
    await Promise.all([ownerCtx.close(), adminCtx.close(), memberCtx.close()]);
  }, 120_000);
});
