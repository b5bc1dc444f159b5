import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { bearer } from '../helpers/app.ts';
import { screenshot, seriousA11yViolations } from './browser.ts';
import { consoleSuite, type ConsoleStack } from './console-stack.ts';
import { browserCookies, consoleCall, emailMaker, joinWorkspace, type Person, signUpOverHttp } from './people.ts';

/**
 * The console's Overview, API keys, Team and Settings sections, each at its own address (issue 26
 * §1; docs/console.md), in Debian's Chromium against the real console server, API, worker and
 * Postgres: each section's main path, axe on every section, and no sideways scroll on a phone.
 */
let stack: ConsoleStack;
let browser: Browser;
consoleSuite((s, b) => {
  [stack, browser] = [s, b];
});

const newEmail = emailMaker('sections');
/** How long a poll waits for the page to catch up (a wait on a loaded machine, not a bound on speed). */
const WAIT = { timeout: 30_000 };
const api = () => stack.pipeline.app;

async function openConsole(person: Person, path: string, opts: { clipboard?: boolean } = {}): Promise<{ page: Page; close: () => Promise<void> }> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  if (opts.clipboard) await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.url });
  await ctx.addCookies(browserCookies(stack, person));
  const page = await ctx.newPage();
  await page.goto(`${stack.url}${path}`);
  return { page, close: () => ctx.close() };
}

/** At a 390 px wide phone viewport nothing makes the page scroll sideways (wide tables scroll in their own box). */
async function fitsAPhone(page: Page): Promise<boolean> {
  const viewport = page.viewportSize()!;
  await page.setViewportSize({ width: 390, height: 844 });
  const width = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
  await page.setViewportSize(viewport);
  return width <= 390;
}

/** The section navigation's link to `label`, followed with the keyboard; the address and aria-current follow. */
async function goBySections(page: Page, label: string, path: string): Promise<void> {
  const link = page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: label, exact: true });
  await link.focus();
  await page.keyboard.press('Enter');
  await page.waitForURL(`${stack.url}${path}`);
  expect(await link.getAttribute('aria-current')).toBe('page');
}

/** What the ledger says the workspace may spend: the sum of its community and purchased movements. */
async function ledgerAvailable(workspaceId: string): Promise<number> {
  const r = await stack.pipeline.db.query<{ n: string }>('SELECT coalesce(sum(community_delta + purchased_delta), 0) AS n FROM credit_ledger WHERE user_id = $1', [workspaceId]);
  return Number(r.rows[0]!.n);
}

async function noiseJpeg(): Promise<string> {
  return (await sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer()).toString('base64');
}

async function teamWorkspace(owner: Person, name: string): Promise<string> {
  const res = await consoleCall(stack, owner, 'POST', '/api/v1/workspaces', { name });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

describe('Overview', () => {
  it('shows the balance the ledger says after an analysis, what it charged, the request, and links to create a key and to try the playground', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const created = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/keys`, { kind: 'live', name: 'overview' });
    const { key } = (await created.json()) as { key: string };
    const analyzed = await api().inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: await noiseJpeg(), modules: ['dating', 'location'] } });
    expect(analyzed.statusCode).toBe(200);
    const { usage, meta } = analyzed.json() as { usage: { creditsCharged: number }; meta: { requestId: string } };
    expect(usage.creditsCharged).toBe(2);
    await api().requestLog.flush();
    const available = await ledgerAvailable(owner.workspaceId);
    expect(available).toBe(1000 - 2);

    const { page, close } = await openConsole(owner, '/');
    try {
      await expect.poll(() => page.getByTestId('available').textContent(), WAIT).toBe(available.toLocaleString('en'));
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(owner.email);
      expect(await page.getByTestId('charged-7d').textContent()).toBe('2 credits');
      const recent = page.getByTestId('recent-requests').getByRole('link');
      await expect.poll(() => recent.count(), WAIT).toBe(1);
      expect(await recent.first().getAttribute('aria-label')).toBe(`Request ${meta.requestId}: analyzeV1, 200`);
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(await fitsAPhone(page)).toBe(true);
      await screenshot(page, 'overview');

      const start = page.getByRole('navigation', { name: 'Get started' });
      expect(await start.getByRole('link', { name: 'Try the playground' }).getAttribute('href')).toBe('/playground');
      await start.getByRole('link', { name: 'Create an API key' }).focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${stack.url}/keys`);
      expect(await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'API keys' }).getAttribute('aria-current')).toBe('page');
    } finally {
      await close();
    }
  }, 180_000);
});

describe('API keys', () => {
  it('creates a key shown once with a copy button, lists it by prefix, the API takes it; revoked after an in-page confirmation, it leaves the list and the API refuses it', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const { page, close } = await openConsole(owner, '/', { clipboard: true });
    try {
      await goBySections(page, 'API keys', '/keys');
      await page.getByLabel('Kind').selectOption('live');
      await page.getByLabel('Name', { exact: true }).fill('billing server');
      await page.getByRole('button', { name: 'Create key' }).click();
      await expect.poll(() => page.getByTestId('new-key').textContent(), WAIT).toMatch(/^svc_live_\S{20,}$/);
      const key = (await page.getByTestId('new-key').textContent())!;
      await page.getByRole('button', { name: 'Copy', exact: true }).click();
      await expect.poll(() => page.getByRole('button', { name: 'Copied' }).count()).toBe(1);
      expect(await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText())).toBe(key);

      const row = page.getByTestId('keys').getByRole('row').filter({ hasText: 'billing server' });
      expect(await row.count()).toBe(1);
      const cells = await row.getByRole('cell').allTextContents();
      expect(cells.slice(0, 5)).toEqual([`svc_live_…${key.slice(-4)}`, 'billing server', new Date().toISOString().slice(0, 10), 'never', 'active']);
      expect((await api().inject({ method: 'GET', url: '/v1/modules', headers: bearer(key) })).statusCode).toBe(200);
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(await fitsAPhone(page)).toBe(true);
      await screenshot(page, 'api-keys');

      // The confirmation is in the page: "Keep it" has the focus, and keeping (Escape) revokes nothing.
      const revokeButton = page.getByRole('button', { name: `Revoke svc_live_…${key.slice(-4)}` });
      await revokeButton.click();
      const ask = page.getByRole('group', { name: `Revoke svc_live_…${key.slice(-4)}?` });
      await expect.poll(() => ask.count(), WAIT).toBe(1);
      expect(await ask.textContent()).toContain('Requests with it are refused within a second. This cannot be undone; billing server needs another key.');
      await expect.poll(() => page.evaluate(() => (globalThis as unknown as { document: { activeElement: { textContent: string } | null } }).document.activeElement?.textContent)).toBe('Keep it');
      expect(await seriousA11yViolations(page)).toEqual([]);
      await page.keyboard.press('Escape');
      await expect.poll(() => ask.count()).toBe(0);
      await expect.poll(() => revokeButton.evaluate((b) => b === (b.ownerDocument as unknown as { activeElement: unknown }).activeElement)).toBe(true);
      expect(await page.getByTestId('keys').getByRole('row').count()).toBe(1);
      expect((await api().inject({ method: 'GET', url: '/v1/modules', headers: bearer(key) })).statusCode).toBe(200);

      // With the keyboard: Revoke, then Tab back from "Keep it" to "Revoke key".
      await revokeButton.press('Enter');
      await expect.poll(() => ask.count(), WAIT).toBe(1);
      await page.keyboard.press('Shift+Tab');
      await page.keyboard.press('Enter');
      await expect.poll(() => page.getByRole('status').filter({ hasText: 'is revoked' }).textContent(), WAIT).toBe(`svc_live_…${key.slice(-4)} is revoked.`);
      expect(await ask.count()).toBe(0);
      expect(await page.getByTestId('keys').count()).toBe(0);
      expect(await page.getByText('No active keys.').isVisible()).toBe(true);
      await page.getByText('Revoked keys (1)').click();
      expect(await page.getByTestId('revoked-keys').textContent()).toContain(`svc_live_…${key.slice(-4)}billing server`);
      const revoked = await stack.pipeline.db.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM api_keys WHERE user_id = $1', [owner.workspaceId]);
      expect(revoked.rows.map((r) => r.revoked_at !== null)).toEqual([true]);
      await expect.poll(async () => (await api().inject({ method: 'GET', url: '/v1/modules', headers: bearer(key) })).statusCode, WAIT).toBe(401);
    } finally {
      await close();
    }
  }, 180_000);
});

describe('Team', () => {
  it('an owner invites a member by e-mail from the Team section: the invitation is listed and mailed', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    await teamWorkspace(owner, 'Harbour Crew');
    const invitee = newEmail();
    const { page, close } = await openConsole(owner, '/team');
    try {
      await page.getByLabel('Workspace', { exact: true }).selectOption({ label: 'Harbour Crew (owner)' });
      await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Team · Harbour Crew');
      await expect.poll(() => page.getByTestId('members').textContent(), WAIT).toContain(`${owner.email}owner`);
      await page.getByLabel('Invite by e-mail').fill(invitee);
      await page.getByLabel('as').selectOption('admin');
      await page.getByRole('button', { name: 'Send invitation' }).click();
      await expect.poll(() => page.getByRole('status').textContent(), WAIT).toBe(`Invitation sent to ${invitee}.`);
      await expect.poll(() => page.getByTestId('members').textContent(), WAIT).toContain(`${invitee}admin (invited)`);
      expect(await page.getByLabel('Invite by e-mail').inputValue()).toBe('');
      const mail = await stack.mail.waitFor((m) => m.to.includes(invitee) && m.subject === 'You are invited to Harbour Crew on Lenstack');
      expect(mail.text).toMatch(new RegExp(`${stack.url}/invitations/accept\\?token=inv_`));
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(await fitsAPhone(page)).toBe(true);
      await screenshot(page, 'team');
      // The address survives a reload, in the workspace chosen.
      await page.reload();
      await expect.poll(() => page.getByTestId('members').textContent(), WAIT).toContain(`${invitee}admin (invited)`);
    } finally {
      await close();
    }
  }, 180_000);
});

describe('Settings', () => {
  it('an owner sets how long originals are kept and renames the workspace: saved, said, and read back after a reload; a team workspace offers deletion behind its typed name', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const team = await teamWorkspace(owner, 'Quay Survey');
    const { page, close } = await openConsole(owner, '/');
    try {
      await goBySections(page, 'Settings', '/settings');
      await page.getByLabel('Workspace', { exact: true }).selectOption({ label: 'Quay Survey (owner)' });
      await expect.poll(() => page.getByTestId('workspace-name').textContent(), WAIT).toBe('Quay Survey');
      const retention = page.getByLabel(/^Keep original photos/);
      await expect.poll(() => retention.isEnabled(), WAIT).toBe(true);
      expect(await retention.inputValue()).toBe('');
      await retention.fill('30');
      await page.getByRole('button', { name: 'Save' }).click();
      await expect.poll(() => page.getByRole('status').textContent(), WAIT).toBe('Original photos are kept 30 days after they were last sent.');
      const stored = await stack.pipeline.db.query<{ retention_days: number | null }>('SELECT retention_days FROM users WHERE id = $1', [team]);
      expect(stored.rows[0]!.retention_days).toBe(30);
      const personal = await stack.pipeline.db.query<{ retention_days: number | null }>('SELECT retention_days FROM users WHERE id = $1', [owner.workspaceId]);
      expect(personal.rows[0]!.retention_days).toBeNull();
      const form = page.getByRole('form', { name: 'Delete Quay Survey' });
      await form.getByLabel('Type Quay Survey to confirm').fill('Quay');
      expect(await form.getByRole('button', { name: 'Delete workspace' }).isDisabled()).toBe(true);
      expect(await page.getByRole('link', { name: 'Account' }).count()).toBeGreaterThan(0);
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(await fitsAPhone(page)).toBe(true);
      await screenshot(page, 'settings');

      // A number of days out of range is said, and changes nothing.
      for (const bad of ['0', '3651', '2.5']) {
        await retention.fill(bad);
        await page.getByRole('button', { name: 'Save' }).click();
        await expect.poll(() => page.getByRole('alert').textContent(), WAIT).toBe('Keep original photos between 1 and 3,650 days, or leave the field empty; nothing was saved.');
      }
      expect((await stack.pipeline.db.query<{ retention_days: number }>('SELECT retention_days FROM users WHERE id = $1', [team])).rows[0]!.retention_days).toBe(30);

      // Renamed: the heading, the switcher and the delete confirmation follow, without a reload.
      const renameForm = page.getByRole('form', { name: 'Rename workspace' });
      expect(await renameForm.getByLabel('Name', { exact: true }).inputValue()).toBe('Quay Survey');
      await renameForm.getByLabel('Name', { exact: true }).fill('  Quay Survey North ');
      await renameForm.getByRole('button', { name: 'Rename' }).click();
      await expect.poll(() => page.getByRole('status').filter({ hasText: 'Renamed' }).textContent(), WAIT).toBe('Renamed to Quay Survey North.');
      await expect.poll(() => page.getByTestId('workspace-name').textContent(), WAIT).toBe('Quay Survey North');
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Settings · Quay Survey North');
      expect(await page.title()).toBe(`Settings · Quay Survey North · Lenstack`);
      expect(await page.getByLabel('Workspace', { exact: true }).locator('option:checked').textContent()).toBe('Quay Survey North (owner)');
      expect(await page.getByRole('form', { name: 'Delete Quay Survey North' }).count()).toBe(1);
      expect(await renameForm.getByLabel('Name', { exact: true }).inputValue()).toBe('Quay Survey North');
      expect((await stack.pipeline.db.query<{ name: string }>('SELECT name FROM users WHERE id = $1', [team])).rows[0]!.name).toBe('Quay Survey North');
      expect(await seriousA11yViolations(page)).toEqual([]);

      await page.reload();
      await expect.poll(() => page.getByLabel(/^Keep original photos/).inputValue(), WAIT).toBe('30');
      expect(await page.getByTestId('workspace-name').textContent()).toBe('Quay Survey North');
      // The personal workspace has no delete form: it goes with the account.
      await page.getByLabel('Workspace', { exact: true }).selectOption({ label: `${owner.email} (owner)` });
      await expect.poll(() => page.getByTestId('workspace-name').textContent(), WAIT).toBe(owner.email);
      expect(await page.getByRole('form', { name: /^Delete / }).count()).toBe(0);
    } finally {
      await close();
    }
  }, 180_000);
});

describe('renaming a workspace', () => {
  const nameOf = async (id: string) => (await stack.pipeline.db.query<{ name: string | null }>('SELECT name FROM users WHERE id = $1', [id])).rows[0]!.name;
  const rename = (person: Person, id: string, body: unknown) => consoleCall(stack, person, 'PATCH', `/api/v1/workspaces/${id}`, body);

  it('is refused to a member, to an outsider (404, as if it did not exist), for a bad name, and from another site; an owner or admin renames', async () => {
    const [owner, admin, member, outsider] = [await signUpOverHttp(stack, newEmail()), await signUpOverHttp(stack, newEmail()), await signUpOverHttp(stack, newEmail()), await signUpOverHttp(stack, newEmail())];
    const ws = await teamWorkspace(owner, 'Dock Ledger');
    await joinWorkspace(stack, owner, ws, admin, 'admin');
    await joinWorkspace(stack, owner, ws, member, 'member');

    const byMember = await rename(member, ws, { name: 'Taken Over' });
    expect(byMember.status).toBe(403);
    expect(await byMember.json()).toMatchObject({ error: { code: 'FORBIDDEN' } });
    expect((await rename(outsider, ws, { name: 'Taken Over' })).status).toBe(404);
    // Another person's workspace, by its id: not found, not forbidden.
    const elsewhere = await rename(owner, outsider.workspaceId, { name: 'Taken Over' });
    expect(elsewhere.status).toBe(404);
    expect(await elsewhere.json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
    expect(await nameOf(outsider.workspaceId)).toBeNull();

    for (const bad of ['x'.repeat(81), 'Dock\nLedger', 'Dock\r\nBcc: someone', 'Dock\u202eregdeL', 'tab\there', '   ', '', 42, null]) {
      const res = await rename(owner, ws, { name: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(await res.json(), JSON.stringify(bad)).toMatchObject({ error: { code: 'VALIDATION_FAILED', message: expect.stringMatching(/name/) } });
    }
    expect((await rename(owner, ws, { name: 'Fine', extra: true })).status).toBe(400);
    // The cross-site check: the same call without the console's own Origin changes nothing.
    const crossSite = await fetch(`${stack.url}/api/v1/workspaces/${ws}`, {
      method: 'PATCH',
      headers: { cookie: owner.cookie, origin: 'https://evil.example', 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Cross Site' }),
    });
    expect(crossSite.status).toBe(403);
    expect(await nameOf(ws)).toBe('Dock Ledger');

    const byAdmin = await rename(admin, ws, { name: '  Dock Ledger East  ' });
    expect(byAdmin.status).toBe(200);
    expect(await byAdmin.json()).toEqual({ workspace: { id: ws, name: 'Dock Ledger East' } });
    expect(await nameOf(ws)).toBe('Dock Ledger East');
    const seen = (await (await consoleCall(stack, member, 'GET', '/api/v1/session')).json()) as { workspaces: Array<{ id: string; name: string }> };
    expect(seen.workspaces.find((w) => w.id === ws)?.name).toBe('Dock Ledger East');
    // 80 characters is the bound (as for a new workspace), counted in characters, not bytes.
    expect((await rename(owner, ws, { name: 'é'.repeat(80) })).status).toBe(200);
    expect(await nameOf(ws)).toBe('é'.repeat(80));
    // An owner names their personal workspace too (shown instead of their address).
    expect((await rename(owner, owner.workspaceId, { name: 'Ada’s photos' })).status).toBe(200);
    expect(await nameOf(owner.workspaceId)).toBe('Ada’s photos');
  }, 180_000);
});

describe('every section', () => {
  it('is reached from the section navigation at its own address, with no serious axe findings and no sideways scroll on a phone', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/keys`, { kind: 'test', name: 'sandbox' });
    const { page, close } = await openConsole(owner, '/');
    try {
      const sections: Array<[string, string, string]> = [
        ['Playground', '/playground', 'Playground'],
        ['Requests', '/requests', 'Requests'],
        ['Photos', '/photos', 'Photos'],
        ['Batches', '/batches', 'Batches'],
        ['Usage & billing', '/usage', 'Usage & billing'],
        ['API keys', '/keys', 'API keys'],
        ['Team', '/team', 'Team'],
        ['Settings', '/settings', 'Settings'],
        ['Overview', '/', owner.email],
      ];
      for (const [label, path, heading] of sections) {
        await goBySections(page, label, path);
        await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe(heading === owner.email ? heading : `${heading} · ${owner.email}`);
        expect(await page.title()).toBe(`${label} · ${owner.email} · Lenstack`);
        // The new section's heading has the focus: a screen reader says where one is now.
        await expect.poll(() => page.evaluate(() => (globalThis as unknown as { document: { activeElement: { tagName: string } | null } }).document.activeElement?.tagName), { ...WAIT, message: label }).toBe('H1');
        // Loaded: nothing on the page still says it is loading.
        await expect.poll(() => page.locator('[aria-busy="true"]').count(), WAIT).toBe(0);
        expect(await seriousA11yViolations(page), label).toEqual([]);
        expect(await fitsAPhone(page), label).toBe(true);
      }
      await goBySections(page, 'Batches', '/batches');
      await screenshot(page, 'batches');
    } finally {
      await close();
    }
  }, 240_000);
});
