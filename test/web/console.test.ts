import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import { distinctPhotos } from '../../bench/distinct-photos.ts';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { KEY_CACHE_TTL_MS } from '../../auth/cache.ts';
import { bearer } from '../helpers/app.ts';
import { launchChromium, seriousA11yViolations } from './browser.ts';
import { BROWSER_TEST_MS, STACK_SETUP_MS, startConsoleStack, STRIPE_WEBHOOK_SECRET, type ConsoleStack } from './console-stack.ts';
import { Steps } from '../harness/steps.ts';
import Stripe from 'stripe';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { RecordingPaymentGateway } from '../../payments/recording-gateway.ts';

/**
 * The console in Debian's Chromium against the real stack: sign up with a password, confirm from
 * the mail a real SMTP server received, create a live key, analyze with it through the API, see
 * the credits move, revoke the key and see the API refuse it. Plus what an attacker would try.
 */
/** LENSTACK_SCREENSHOTS=1 writes docs/screenshots/<page>-{desktop,phone}.png while the flow runs. */
const SHOTS = process.env.LENSTACK_SCREENSHOTS ? fileURLToPath(new URL('../../docs/screenshots/', import.meta.url)) : null;

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  const viewport = page.viewportSize()!;
  await page.screenshot({ path: `${SHOTS}${name}-desktop.png`, fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: `${SHOTS}${name}-phone.png`, fullPage: true });
  await page.setViewportSize(viewport);
}

/** At a 390 px wide phone viewport nothing makes the page scroll sideways. */
async function fitsAPhone(page: Page): Promise<boolean> {
  const viewport = page.viewportSize()!;
  await page.setViewportSize({ width: 390, height: 844 });
  const width = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
  await page.setViewportSize(viewport);
  return width <= 390;
}

const PHOTO = readFileSync(new URL('../fixtures/photos/Canon_40D.jpg', import.meta.url)).toString('base64');
const PASSWORD = 'lantern orbit cactus violin';

let stack: ConsoleStack;
let browser: Browser;
vi.setConfig({ testTimeout: BROWSER_TEST_MS });

beforeAll(
  () =>
    new Steps().within(STACK_SETUP_MS, async (steps) => {
      stack = await startConsoleStack(steps);
      browser = await steps.step('Chromium', () => launchChromium());
    }),
  STACK_SETUP_MS + 5_000,
);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

let counter = 0;
const newEmail = () => `person${process.pid}-${Date.now()}-${counter++}@example.test`;

/** Sign up in the browser and follow the confirmation link from the mail. */
async function signUpAndConfirm(page: Page, email: string, shots = false): Promise<void> {
  await page.goto(`${stack.url}/sign-up`);
  await page.getByLabel('Your name').fill('Ada');
  await page.getByLabel('E-mail address').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  if (shots) await shot(page, 'sign-up');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.waitForURL(/\/check-mail/);
  if (shots) {
    await shot(page, 'check-mail');
    // The development mailbox shows the same mail, its link clickable.
    await page.goto(`${stack.url}/dev/mailbox`);
    await expect.poll(() => page.getByRole('heading', { name: 'Confirm your e-mail address for Lenstack' }).first().isVisible()).toBe(true);
    expect(await page.getByRole('note').textContent()).toContain('Development mailbox');
    expect(await page.getByRole('link', { name: /verify-email/ }).first().getAttribute('href')).toContain('/api/v1/auth/verify-email?token=');
    await shot(page, 'dev-mailbox');
  }
  const mail = await stack.mail.waitFor((m) => m.to.includes(email));
  expect(mail.subject).toBe('Confirm your e-mail address for Lenstack');
  const link = /https?:\/\/\S+/.exec(mail.text)?.[0];
  expect(link).toMatch(new RegExp(`^${stack.url}/api/v1/auth/verify-email\\?token=`));
  await page.goto(link!);
  // Confirming signs nobody in (test/security/console-accounts.test.ts): the person signs in next.
  await page.waitForURL(/\/sign-in\?verified=1$/);
  await page.getByLabel('E-mail address').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${stack.url}/`);
}

async function analyzeWith(key: string) {
  const res = await stack.pipeline.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: PHOTO, modules: ['dating'] } });
  return { status: res.statusCode, body: res.json() as { usage?: { creditsCharged: number }; meta?: { requestId: string }; error?: { code: string } } };
}

describe('the console in a real browser', () => {
  // Every test makes its own person, page and key: none relies on what another one left behind,
  // so each can run alone (`-t`) or in any order.
  const contexts: BrowserContext[] = [];
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((c) => c.close()));
  });

  async function freshPage(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    return { context, page: await context.newPage() };
  }

  /** A new person, signed up and confirmed: their dashboard open, 1,000 credits on it. */
  async function signedIn(shots = false): Promise<{ context: BrowserContext; page: Page; email: string }> {
    const { context, page } = await freshPage();
    const email = newEmail();
    await signUpAndConfirm(page, email, shots);
    await expect.poll(() => page.getByTestId('available').textContent(), { timeout: 30_000 }).toBe('1,000');
    return { context, page, email };
  }

  /** Opens a section from the section navigation. */
  async function openSection(page: Page, label: string, path: string): Promise<void> {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: label, exact: true }).click();
    await page.waitForURL(`${stack.url}${path}`);
  }

  /** Creates a live key in the API keys section and returns it (shown once). */
  async function createLiveKey(page: Page, name: string): Promise<string> {
    await openSection(page, 'API keys', '/keys');
    await page.getByLabel('Kind').selectOption('live');
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect.poll(() => page.getByTestId('new-key').textContent()).toMatch(/^svc_live_/);
    return (await page.getByTestId('new-key').textContent()) ?? '';
  }

  const cookieHeader = async (context: BrowserContext) => (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');

  it('refuses a common or short password with a reason, and creates nobody', async () => {
    const { page } = await freshPage();
    const email = newEmail();
    await page.goto(`${stack.url}/sign-up`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByLabel('Password').fill('passwordpassword');
    await page.getByRole('button', { name: 'Create account' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('commonly used');
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('at least 15 characters');
    const rows = await stack.pipeline.db.query('SELECT 1 FROM console_users WHERE email = $1', [email]);
    expect(rows.rowCount).toBe(0);
    expect(stack.mail.messages().filter((m) => m.to.includes(email))).toHaveLength(0);
  });

  it('signs up, confirms from the mail, and lands signed in with 1,000 community credits', async () => {
    const { context, page, email } = await signedIn(true);
    expect(await page.getByTestId('community').textContent()).toBe('1,000');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(email);
    // The session cookie cannot be read by scripts and is not sent cross-site.
    const cookie = (await context.cookies()).find((c) => c.name.endsWith('session_token'));
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
  });

  it('creates a live key shown once, and the API bills it: the console shows the credits move', async () => {
    const { page } = await signedIn();
    const liveKey = await createLiveKey(page, 'ci server');
    expect(await page.getByTestId('keys').textContent()).toContain('ci server');

    expect(await page.getByTestId('keys').textContent()).toContain('never');
    const first = await analyzeWith(liveKey);
    expect(first.status).toBe(200);
    const charged = first.body.usage!.creditsCharged;
    expect(charged).toBeGreaterThan(0);

    await openSection(page, 'Overview', '/');
    await page.getByRole('button', { name: 'Refresh' }).click();
    await expect.poll(() => page.getByTestId('available').textContent()).toBe((1000 - charged).toLocaleString('en'));
    // Usage & billing shows the analysis as one row with what it was charged (not a hold and a charge).
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Usage & billing' }).click();
    const usage = page.getByTestId('usage-rows').getByRole('row');
    await expect.poll(() => usage.count(), { timeout: 30_000 }).toBe(2);
    expect((await usage.first().getByRole('cell').allTextContents()).slice(1, 4)).toEqual(['Analysis', first.body.meta!.requestId, String(charged)]);
    await openSection(page, 'API keys', '/keys');
    // The key's first use is recorded (to the minute) and listed.
    await expect.poll(async () => (await stack.pipeline.db.query('SELECT last_used_at FROM api_keys WHERE prefix = $1 AND last4 = $2', ['svc_live_', liveKey.slice(-4)])).rows[0]?.last_used_at ?? null).not.toBeNull();
    await page.reload();
    await expect.poll(() => page.getByTestId('keys').textContent()).not.toContain('never');
    await openSection(page, 'Overview', '/');
    await expect.poll(() => page.getByTestId('available').textContent()).toBe((1000 - charged).toLocaleString('en'));
  });

  it('reads on a 390 px phone without sideways scrolling', async () => {
    const { page } = await signedIn();
    expect(await fitsAPhone(page)).toBe(true);
    await page.goto(`${stack.url}/sign-in`);
    expect(await fitsAPhone(page)).toBe(true);
    await page.goBack();
    await page.waitForURL(`${stack.url}/`);
  });

  it('has no serious accessibility violations on the overview and the API keys', async () => {
    const { page } = await signedIn();
    expect(await seriousA11yViolations(page)).toEqual([]);
    // With a key listed, as a console in use looks.
    await createLiveKey(page, 'a11y');
    expect(await seriousA11yViolations(page)).toEqual([]);
  });

  it('revokes the key and the API refuses it', async () => {
    const { page } = await signedIn();
    const liveKey = await createLiveKey(page, 'to revoke');
    // Used once first, so the API process has it in its key cache: the refusal below is the eviction's.
    expect((await analyzeWith(liveKey)).status).toBe(200);
    await page.getByRole('button', { name: /^Revoke svc_live_/ }).click();
    // The confirmation is asked in the page (test/web/sections.test.ts walks it through).
    await page.getByRole('group', { name: /^Revoke svc_live_/ }).getByRole('button', { name: 'Revoke key' }).click();
    // It leaves the active keys (listed under the revoked ones).
    await expect.poll(() => page.getByTestId('keys').count()).toBe(0);
    expect(await page.getByTestId('revoked-keys').textContent()).toContain('to revoke');
    // The API process hears the revocation over Redis; its cache no longer serves the key. The
    // window is far below the cache's 5 min TTL, so the 401 is the eviction's, not the entry
    // expiring; how fast it comes is measured in bench/timings.ts, not asserted here.
    expect(30_000 * 10).toBeLessThanOrEqual(KEY_CACHE_TTL_MS);
    await expect.poll(async () => (await analyzeWith(liveKey)).status, { timeout: 30_000, interval: 50 }).toBe(401);
  });

  it('refuses a state change from another origin, with the session cookie, and creates no key', async () => {
    const { context } = await signedIn();
    const cookies = await cookieHeader(context);
    const session = (await (await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: cookies } })).json()) as { workspaces: Array<{ id: string }> };
    const ws = session.workspaces[0]!.id;
    const before = await stack.pipeline.db.query('SELECT count(*)::int AS n FROM api_keys WHERE user_id = $1', [ws]);
    const attempts: Array<Record<string, string>> = [{ origin: 'https://evil.example' }, { 'sec-fetch-site': 'cross-site' }, {}];
    for (const headers of attempts) {
      const res = await fetch(`${stack.url}/api/v1/workspaces/${ws}/keys`, {
        method: 'POST',
        headers: { cookie: cookies, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ kind: 'live' }),
      });
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('FORBIDDEN');
    }
    const after = await stack.pipeline.db.query('SELECT count(*)::int AS n FROM api_keys WHERE user_id = $1', [ws]);
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it("answers 404 for another workspace's keys and credits", async () => {
    const { context } = await signedIn();
    const other = await signedIn();
    const cookies = await cookieHeader(other.context);
    const mine = (await (await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: await cookieHeader(context) } })).json()) as { workspaces: Array<{ id: string }> };
    const target = mine.workspaces[0]!.id;
    for (const path of [`/api/v1/workspaces/${target}/keys`, `/api/v1/workspaces/${target}/credits`, '/api/v1/workspaces/usr_nonexistent/keys']) {
      const res = await fetch(`${stack.url}${path}`, { headers: { cookie: cookies } });
      expect(res.status, path).toBe(404);
    }
  });

  it('signs out: the session no longer works', async () => {
    const { context, page } = await signedIn();
    const cookies = await cookieHeader(context);
    expect((await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: cookies } })).status).toBe(200);
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL(/\/sign-in$/);
    await shot(page, 'sign-in');
    expect((await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: cookies } })).status).toBe(401);
  });
});

describe('magic links, sign-in throttling and no enumeration', () => {
  const post = (path: string, body: unknown, cookie = '') =>
    fetch(`${stack.url}${path}`, { method: 'POST', headers: { origin: stack.url, 'content-type': 'application/json', ...(cookie ? { cookie } : {}) }, body: JSON.stringify(body) });

  it('signs a new person in from a mailed link, once: a second use of the link signs nobody in', async () => {
    const email = newEmail();
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${stack.url}/sign-in`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByRole('button', { name: 'E-mail me a sign-in link instead' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('works once, for 10 minutes');
    const mail = await stack.mail.waitFor((m) => m.to.includes(email) && m.subject === 'Your Lenstack sign-in link');
    const link = /https?:\/\/\S+/.exec(mail.text)![0];
    expect(link).toContain('/api/v1/auth/magic-link/verify?token=');
    // Stored hashed: the token in the mail is nowhere in the database.
    const token = new URL(link).searchParams.get('token')!;
    const stored = await stack.pipeline.db.query('SELECT 1 FROM console_verifications WHERE identifier = $1 OR value LIKE $2', [token, `%${token}%`]);
    expect(stored.rowCount).toBe(0);
    await page.goto(link);
    await expect.poll(() => page.getByTestId('available').textContent(), { timeout: 30_000 }).toBe('1,000');
    await context.close();

    const again = await browser.newContext();
    const res = await again.request.get(link, { maxRedirects: 0 });
    expect(res.status()).toBe(302);
    expect(res.headers()['location']).toContain('error=');
    expect((await again.cookies()).some((c) => c.name.endsWith('session_token'))).toBe(false);
    await again.close();
  });

  it('answers a sign-up for an existing address like a new one, and tells the owner instead', async () => {
    const email = newEmail();
    const fresh = await post('/api/v1/auth/sign-up/email', { name: 'A', email, password: PASSWORD });
    const taken = await post('/api/v1/auth/sign-up/email', { name: 'B', email, password: 'another long passphrase here' });
    expect(fresh.status).toBe(200);
    expect(taken.status).toBe(200);
    const [a, b] = [(await fresh.json()) as { token: unknown; user: Record<string, unknown> }, (await taken.json()) as { token: unknown; user: Record<string, unknown> }];
    expect(Object.keys(b).sort()).toEqual(Object.keys(a).sort());
    expect(Object.keys(b.user).sort()).toEqual(Object.keys(a.user).sort());
    // No session token in either body (it travels in the cookie only; web/plugins/hardening.ts).
    expect([a.token, b.token]).toEqual([undefined, undefined]);
    await stack.mail.waitFor((m) => m.to.includes(email) && m.subject === 'You already have a Lenstack account');
    const people = await stack.pipeline.db.query('SELECT name FROM console_users WHERE email = $1', [email]);
    expect(people.rows).toEqual([{ name: 'A' }]);
  });

  it('throttles password guessing per account in Redis: the 11th try in 15 minutes is 429 with Retry-After', async () => {
    const email = newEmail();
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await post('/api/v1/auth/sign-in/email', { email, password: `wrong guess number ${i}` })).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses[10]).toBe(429);
    const refused = await post('/api/v1/auth/sign-in/email', { email, password: 'wrong guess again' });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('RATE_LIMITED');
    expect(body.error.message).toContain('this account');
    // Another account from the same address is not locked out by it.
    expect((await post('/api/v1/auth/sign-in/email', { email: newEmail(), password: 'wrong guess' })).status).toBe(401);
  });
});

describe('GitHub and Google sign-in, against local providers at the wire', () => {
  it('signs a new person in with GitHub (authorize page, PKCE): their workspace gets 1,000 credits', async () => {
    const email = newEmail();
    stack.github.signInAs({ id: 4242, login: 'octo-ada', name: 'Ada', emails: [{ email: 'ada-unverified@example.test', primary: false, verified: false }, { email, primary: true, verified: true }] });
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${stack.url}/sign-in`);
    await page.getByRole('button', { name: 'Continue with GitHub' }).click();
    await page.getByRole('button', { name: 'Authorize' }).click();
    await expect.poll(() => page.getByTestId('available').textContent()).toBe('1,000');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(email);
    expect(stack.github.refusals).toEqual([]);
    const identity = await stack.pipeline.db.query(
      `SELECT i.provider_id, i.account_id FROM console_identities i JOIN console_users u ON u.id = i.user_id WHERE u.email = $1`,
      [email],
    );
    expect(identity.rows).toEqual([{ provider_id: 'github', account_id: '4242' }]);
    await context.close();
  });

  it('links Google to the person who signed up with a password for the same verified address', async () => {
    const email = newEmail();
    const first = await browser.newContext();
    await signUpAndConfirm(await first.newPage(), email);
    await first.close();
    stack.google.addAccount('ada-google', { email, email_verified: true, name: 'Ada G' });

    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${stack.url}/sign-in`);
    await page.getByRole('button', { name: 'Continue with Google' }).click();
    // oidc-provider's development login and consent pages.
    await page.locator('input[name="login"]').fill('ada-google');
    await page.locator('input[name="password"]').fill('anything');
    await page.locator('button[type="submit"]').click();
    await page.locator('button[type="submit"]').click();
    await expect.poll(() => page.getByTestId('available').textContent(), { timeout: 10_000 }).toBe('1,000');
    const people = await stack.pipeline.db.query(
      `SELECT u.id, array_agg(i.provider_id ORDER BY i.provider_id) AS providers FROM console_users u JOIN console_identities i ON i.user_id = u.id WHERE u.email = $1 GROUP BY u.id`,
      [email],
    );
    expect(people.rows).toHaveLength(1);
    expect(people.rows[0].providers).toEqual(['credential', 'google']);
    const workspaces = await stack.pipeline.db.query('SELECT count(*)::int AS n FROM workspace_members m JOIN console_users u ON u.id = m.console_user_id WHERE u.email = $1', [email]);
    expect(workspaces.rows[0].n).toBe(1);
    await context.close();
  });

  it("refuses an unverified Google claim to someone else's address: no session, no link, no workspace", async () => {
    // The victim has an account (password, confirmed address); the attacker's Google account claims
    // the same address without Google having verified it.
    const email = newEmail();
    const victim = await browser.newContext();
    await signUpAndConfirm(await victim.newPage(), email);
    await victim.close();
    stack.google.addAccount('attacker', { email, email_verified: false, name: 'Mallory' });
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${stack.url}/sign-in`);
    await page.getByRole('button', { name: 'Continue with Google' }).click();
    await page.locator('input[name="login"]').fill('attacker');
    await page.locator('input[name="password"]').fill('anything');
    await page.locator('button[type="submit"]').click();
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(/\/sign-in\?error=/);
    expect(await page.getByRole('alert').textContent()).toContain('did not work');
    const cookies = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    expect((await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: cookies } })).status).toBe(401);
    const identities = await stack.pipeline.db.query(
      `SELECT i.provider_id FROM console_identities i JOIN console_users u ON u.id = i.user_id WHERE u.email = $1 ORDER BY 1`,
      [email],
    );
    expect(identities.rows).toEqual([{ provider_id: 'credential' }]);
    await context.close();
  });
});

describe('team workspaces and invitations', () => {
  const cookieOf = async (context: BrowserContext) => (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');

  it('an owner makes a team workspace and invites a member by mail; the member joins with a new account and may not manage keys', async () => {
    const ownerEmail = newEmail();
    const owner = await browser.newContext();
    const page = await owner.newPage();
    await signUpAndConfirm(page, ownerEmail);
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Settings' }).click();
    await page.getByLabel('Workspace name').fill('Acme Insurance');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Acme Insurance');
    // A team workspace starts with nothing: the signup credits were the person's own workspace's.
    await expect.poll(() => page.getByTestId('available').textContent()).toBe('0');

    const memberEmail = newEmail();
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Team' }).click();
    await page.getByLabel('Invite by e-mail').fill(memberEmail);
    await page.getByRole('button', { name: 'Send invitation' }).click();
    await expect.poll(() => page.getByTestId('members').textContent()).toContain(`${memberEmail}member (invited)`);
    const invitation = await stack.mail.waitFor((m) => m.to.includes(memberEmail) && m.subject === 'You are invited to Acme Insurance on Lenstack');
    const link = /https?:\/\/\S+/.exec(invitation.text)![0];
    expect(link).toMatch(new RegExp(`^${stack.url}/invitations/accept\\?token=inv_`));

    // Someone else who got hold of the link cannot use it.
    const intruder = await browser.newContext();
    await signUpAndConfirm(await intruder.newPage(), newEmail());
    const token = new URL(link).searchParams.get('token')!;
    const stolen = await fetch(`${stack.url}/api/v1/invitations/accept`, {
      method: 'POST',
      headers: { cookie: await cookieOf(intruder), origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    expect(stolen.status).toBe(403);
    expect(((await stolen.json()) as { error: { message: string } }).error.message).toContain(`This invitation is for ${memberEmail}`);
    await intruder.close();

    // The invited person has no account yet: the link leads through sign-up and back.
    const member = await browser.newContext();
    const mp = await member.newPage();
    await mp.goto(link);
    await mp.getByRole('link', { name: 'Create an account' }).click();
    await mp.getByLabel('E-mail address').fill(memberEmail);
    await mp.getByLabel('Password').fill(PASSWORD);
    await mp.getByRole('button', { name: 'Create account' }).click();
    const confirm = await stack.mail.waitFor((m) => m.to.includes(memberEmail) && m.subject === 'Confirm your e-mail address for Lenstack');
    await mp.goto(/https?:\/\/\S+/.exec(confirm.text)![0]);
    // Confirming signs nobody in: the sign-in page, then back to the invitation.
    await mp.waitForURL(/\/sign-in\?verified=1&next=/);
    await mp.getByLabel('E-mail address').fill(memberEmail);
    await mp.getByLabel('Password').fill(PASSWORD);
    await mp.getByRole('button', { name: 'Sign in', exact: true }).click();
    await expect.poll(() => mp.getByRole('button', { name: 'Accept invitation' }).isVisible()).toBe(true);
    await shot(mp, 'invitation');
    await mp.getByRole('button', { name: 'Accept invitation' }).click();
    await mp.waitForURL(`${stack.url}/`);
    await mp.getByLabel('Workspace', { exact: true }).selectOption({ label: 'Acme Insurance (member)' });
    await expect.poll(() => mp.getByRole('heading', { level: 1 }).textContent()).toBe('Acme Insurance');
    const memberSections = mp.getByRole('navigation', { name: 'Sections' });
    await memberSections.getByRole('link', { name: 'API keys' }).click();
    await expect.poll(() => mp.getByText('Owners and admins create and revoke keys.').isVisible()).toBe(true);
    expect(await mp.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    await memberSections.getByRole('link', { name: 'Team' }).click();
    await expect.poll(() => mp.getByTestId('members').textContent()).toContain(`${ownerEmail}owner`);

    const session = (await (await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: await cookieOf(member) } })).json()) as { workspaces: Array<{ id: string; name: string; role: string }> };
    const acme = session.workspaces.find((w) => w.name === 'Acme Insurance')!;
    expect(acme.role).toBe('member');
    const keyAttempt = await fetch(`${stack.url}/api/v1/workspaces/${acme.id}/keys`, {
      method: 'POST',
      headers: { cookie: await cookieOf(member), origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'live' }),
    });
    expect(keyAttempt.status).toBe(403);
    expect((await stack.pipeline.db.query('SELECT 1 FROM api_keys WHERE user_id = $1', [acme.id])).rowCount).toBe(0);
    // Nor spend the workspace's credits on a batch: no uploads, no batch, no "New batch" button.
    await memberSections.getByRole('link', { name: 'Batches' }).click();
    await expect.poll(() => mp.getByText('No batches yet. Owners and admins start them.').isVisible()).toBe(true);
    expect(await mp.getByRole('button', { name: 'New batch' }).count()).toBe(0);
    const uploadAttempt = await fetch(`${stack.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { cookie: await cookieOf(member), origin: stack.url, 'tus-resumable': '1.0.0', 'upload-length': '10', 'upload-metadata': `workspace ${Buffer.from(acme.id).toString('base64')}` },
    });
    expect(uploadAttempt.status).toBe(403);
    const batchAttempt = await fetch(`${stack.url}/api/v1/workspaces/${acme.id}/batches`, {
      method: 'POST',
      headers: { cookie: await cookieOf(member), origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ preset: 'quick-scan', uploads: [{ id: `${acme.id}.${'0'.repeat(32)}`, name: 'x.jpg' }] }),
    });
    expect(batchAttempt.status).toBe(403);
    expect((await stack.pipeline.db.query('SELECT 1 FROM uploads WHERE user_id = $1 AND person_id IS NOT NULL', [acme.id])).rowCount).toBe(0);
    // The link worked once.
    const again = await fetch(`${stack.url}/api/v1/invitations/accept`, {
      method: 'POST',
      headers: { cookie: await cookieOf(member), origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    expect(again.status).toBe(400);
    await member.close();
    await owner.close();
  });
});

async function workspaceOf(context: BrowserContext): Promise<string> {
  const cookies = (await context.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
  return ((await (await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: cookies } })).json()) as { workspaces: Array<{ id: string }> }).workspaces[0]!.id;
}

describe('buying credits through Stripe Checkout and its signed webhook', () => {
  const signer = new Stripe('sk_test_123');
  const webhook = (event: unknown, secret = STRIPE_WEBHOOK_SECRET) => {
    const payload = JSON.stringify(event);
    const header = signer.webhooks.generateTestHeaderString({ payload, secret });
    return fetch(`${stack.url}/api/v1/stripe/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': header }, body: payload });
  };
  const completed = (purchaseId: string, amount: number, id = `evt_${purchaseId}`) => ({
    id,
    object: 'event',
    type: 'checkout.session.completed',
    data: { object: { id: `cs_test_${purchaseId}`, object: 'checkout.session', client_reference_id: purchaseId, payment_status: 'paid', amount_total: amount, payment_intent: `pi_${purchaseId}` } },
  });

  it('sends the buyer to Checkout, grants the first pack twice over on the signed webhook, once however often it arrives', async () => {
    const context = await browser.newContext();
    // Stripe's hosted page is outside this machine's network: the test stands in for it.
    await context.route('https://checkout.stripe.com/**', (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>Stripe Checkout</title><h1>Stripe Checkout (test)</h1>' }));
    const page = await context.newPage();
    await signUpAndConfirm(page, newEmail());
    await expect.poll(() => page.getByRole('button', { name: 'Buy the Starter pack' }).isVisible(), { timeout: 30_000 }).toBe(true);
    expect(await page.locator('.packlist').textContent()).toContain('Starter: 1,000 credits + 1,000 first-pack bonus for $10.00');
    await page.getByRole('button', { name: 'Buy the Starter pack' }).click();
    await page.waitForURL(/^https:\/\/checkout\.stripe\.com\//);

    const cookies = (await context.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    const ws = ((await (await fetch(`${stack.url}/api/v1/session`, { headers: { cookie: cookies } })).json()) as { workspaces: Array<{ id: string }> }).workspaces[0]!.id;
    const pending = await stack.pipeline.db.query<{ id: string; amount_cents: number }>(`SELECT id, amount_cents FROM credit_purchases WHERE user_id = $1 AND status = 'pending'`, [ws]);
    expect(pending.rows).toHaveLength(1);
    const purchaseId = pending.rows[0]!.id;
    expect(pending.rows[0]!.amount_cents).toBe(1000);

    // Not signed with our secret: refused, nothing granted.
    expect((await webhook(completed(purchaseId, 1000), 'whsec_forged')).status).toBe(400);
    expect((await getBalance(stack.pipeline.db, ws)).purchased).toBe(0);

    // Stripe delivers at least once: the same event three times, two of them at once.
    const deliveries = await Promise.all([webhook(completed(purchaseId, 1000)), webhook(completed(purchaseId, 1000))]);
    expect(deliveries.map((r) => r.status)).toEqual([200, 200]);
    expect((await webhook(completed(purchaseId, 1000))).status).toBe(200);
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ purchased: 2000, community: 1000 });
    expect(await checkInvariants(stack.pipeline.db, ws)).toEqual([{ userId: ws, ok: true, problems: [] }]);

    // Back on the console from Checkout's success page.
    await page.goto(`${stack.url}/?purchase=${purchaseId}`);
    await expect.poll(() => page.getByTestId('purchased').textContent(), { timeout: 30_000 }).toBe('2,000');
    expect(await page.getByRole('status').first().textContent()).toContain('as soon as Stripe confirms');
    // The bonus was the first pack's: the next one is plain.
    expect(await page.locator('.packlist').textContent()).toContain('Starter: 1,000 credits for $10.00');
    await context.close();
  });

  const setupSucceeded = (workspaceId: string, customer: string, id: string) => ({
    id,
    object: 'event',
    type: 'setup_intent.succeeded',
    data: { object: { id: `seti_${id}`, object: 'setup_intent', status: 'succeeded', customer, payment_method: 'pm_card_visa', metadata: { purpose: 'card-on-file', workspaceId } } },
  });
  const customerOf = async (workspaceId: string) =>
    (await stack.pipeline.db.query<{ stripe_customer_id: string | null }>('SELECT stripe_customer_id FROM users WHERE id = $1', [workspaceId])).rows[0]!.stripe_customer_id;

  it('a card on file through a SetupIntent earns the 4,000 community credits once; the same card on another account earns nothing', async () => {
    const context = await browser.newContext();
    await context.route('https://checkout.stripe.com/**', (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>Stripe Checkout</title><h1>Stripe Checkout (test)</h1>' }));
    const page = await context.newPage();
    await signUpAndConfirm(page, newEmail());
    await page.getByRole('button', { name: 'Add a card' }).click();
    await page.waitForURL(/^https:\/\/checkout\.stripe\.com\//);
    const ws = await workspaceOf(context);
    const customer = await customerOf(ws);
    expect(customer).toMatch(/^cus_/);

    // Stripe's event for another customer (or tampered metadata): not this workspace's card.
    expect((await webhook(setupSucceeded(ws, 'cus_someone_else', 'evt_card_forged'))).status).toBe(200);
    expect((await getBalance(stack.pipeline.db, ws)).community).toBe(1_000);
    // Delivered at least once: twice at once and once more later.
    const deliveries = await Promise.all([webhook(setupSucceeded(ws, customer!, 'evt_card_1')), webhook(setupSucceeded(ws, customer!, 'evt_card_1'))]);
    expect(deliveries.map((r) => r.status)).toEqual([200, 200]);
    expect((await webhook(setupSucceeded(ws, customer!, 'evt_card_1'))).status).toBe(200);
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ community: 5_000, purchased: 0 });
    expect(await checkInvariants(stack.pipeline.db, ws)).toEqual([{ userId: ws, ok: true, problems: [] }]);

    // Back from Checkout: the credits are there and the offer is gone.
    await page.goto(`${stack.url}/?card=added`);
    await expect.poll(() => page.getByTestId('community').textContent(), { timeout: 30_000 }).toBe('5,000');
    expect(await page.getByText(/A card is on file since/).isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: 'Add a card' }).count()).toBe(0);
    await context.close();

    // Another person adds the very same card (the processor's fingerprint is the same): the card is
    // on file there too, but it has earned its credits already.
    const other = await browser.newContext();
    await other.route('https://checkout.stripe.com/**', (route) => route.fulfill({ contentType: 'text/html', body: '<title>Stripe Checkout</title>' }));
    const page2 = await other.newPage();
    await signUpAndConfirm(page2, newEmail());
    await page2.getByRole('button', { name: 'Add a card' }).click();
    await page2.waitForURL(/^https:\/\/checkout\.stripe\.com\//);
    const ws2 = await workspaceOf(other);
    const customer2 = await customerOf(ws2);
    expect(customer2).not.toBe(customer);
    expect((await webhook(setupSucceeded(ws2, customer2!, 'evt_card_2'))).status).toBe(200);
    const flagged = await stack.pipeline.db.query<{ card_on_file_at: Date | null }>('SELECT card_on_file_at FROM users WHERE id = $1', [ws2]);
    expect(flagged.rows[0]!.card_on_file_at).not.toBeNull();
    expect((await getBalance(stack.pipeline.db, ws2)).community).toBe(1_000);

    // A team workspace is not offered the signup credits, and asking anyway is refused.
    const cookie = (await other.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    const headers = { cookie, origin: stack.url, 'content-type': 'application/json' };
    const team = (await (await fetch(`${stack.url}/api/v1/workspaces`, { method: 'POST', headers, body: JSON.stringify({ name: 'Fleet' }) })).json()) as { id: string };
    const credits = (await (await fetch(`${stack.url}/api/v1/workspaces/${team.id}/credits`, { headers: { cookie } })).json()) as { card: unknown };
    expect(credits.card).toEqual({ onFileSince: null, offer: false });
    const refused = await fetch(`${stack.url}/api/v1/workspaces/${team.id}/card`, { method: 'POST', headers: { cookie, origin: stack.url } });
    expect(refused.status).toBe(403);
    expect(await customerOf(team.id)).toBeNull();
    await other.close();
  });

  it('grants nothing when the paid amount is not the pack price, or the purchase is not ours', async () => {
    const context = await browser.newContext();
    await context.route('https://checkout.stripe.com/**', (route) => route.fulfill({ contentType: 'text/html', body: '<title>Stripe Checkout</title>' }));
    const page = await context.newPage();
    await signUpAndConfirm(page, newEmail());
    await page.getByRole('button', { name: 'Buy the Pro pack' }).click();
    await page.waitForURL(/^https:\/\/checkout\.stripe\.com\//);
    const row = await stack.pipeline.db.query<{ id: string; user_id: string }>(
      `SELECT p.id, p.user_id FROM credit_purchases p WHERE p.status = 'pending' AND p.pack = 'pro' ORDER BY p.created_at DESC LIMIT 1`,
    );
    const { id, user_id: ws } = row.rows[0]!;
    expect((await webhook(completed(id, 100))).status).toBe(200);
    expect((await webhook(completed('pur_not_ours', 10_000))).status).toBe(200);
    expect((await getBalance(stack.pipeline.db, ws)).purchased).toBe(0);
    const status = await stack.pipeline.db.query('SELECT status, failure FROM credit_purchases WHERE id = $1', [id]);
    expect(status.rows[0]).toMatchObject({ status: 'failed', failure: 'paid 100 cents, the pack costs 10000' });
    await context.close();
  });
});

describe('purchases without Stripe', () => {
  it('the development gateway grants at once (labelled); with no processor at all purchases and cards are refused and nothing moves', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signUpAndConfirm(page, newEmail());
    const ws = await workspaceOf(context);
    const cookie = (await context.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    const headers = { cookie, origin: stack.url, 'content-type': 'application/json' };

    const development = await stack.variant({ stripe: null, payments: new RecordingPaymentGateway(stack.pipeline.db) });
    const packs = await development.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/packs`, headers });
    expect(packs.json()).toMatchObject({ purchases: 'development' });
    const buy = () => development.inject({ method: 'POST', url: `/api/v1/workspaces/${ws}/purchases`, headers, payload: { pack: 'starter', idempotencyKey: 'click-0001' } });
    const first = await buy();
    expect(first.statusCode).toBe(201);
    expect(first.json()).toMatchObject({ purchase: { status: 'granted', pack: 'starter' } });
    // The same click sent again is the same purchase: charged and granted once.
    expect((await buy()).json()).toMatchObject({ purchase: { purchaseId: first.json().purchase.purchaseId } });
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ community: 1_000, purchased: 2_000 });
    const recorded = await stack.pipeline.db.query('SELECT amount_cents FROM recorded_payments WHERE user_id = $1', [ws]);
    expect(recorded.rows).toEqual([{ amount_cents: 1000 }]);

    const none = await stack.variant({ stripe: null, payments: null });
    expect((await none.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/packs`, headers })).json()).toMatchObject({ purchases: 'unavailable' });
    const refused = await none.inject({ method: 'POST', url: `/api/v1/workspaces/${ws}/purchases`, headers, payload: { pack: 'pro', idempotencyKey: 'click-0002' } });
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', message: expect.stringContaining('STRIPE_SECRET_KEY') });
    const card = await none.inject({ method: 'POST', url: `/api/v1/workspaces/${ws}/card`, headers: { cookie, origin: stack.url } });
    expect(card.statusCode).toBe(503);
    expect((await none.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/credits`, headers })).json().card).toEqual({ onFileSince: null, offer: false });
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ community: 1_000, purchased: 2_000 });
    const purchases = await stack.pipeline.db.query('SELECT pack FROM credit_purchases WHERE user_id = $1', [ws]);
    expect(purchases.rows).toEqual([{ pack: 'starter' }]);
    await context.close();
  });
});

describe('batch export from the console', () => {
  it('the dashboard follows a running batch by push to 100 %; a member downloads it as csv; another workspace gets 404, an unknown format 400, no session 401', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signUpAndConfirm(page, newEmail());
    const ws = await workspaceOf(context);
    const cookie = (await context.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    const key = (await (await fetch(`${stack.url}/api/v1/workspaces/${ws}/keys`, { method: 'POST', headers: { cookie, origin: stack.url, 'content-type': 'application/json' }, body: JSON.stringify({ kind: 'live' }) })).json()) as { key: string };
    // Slow vendors: the dashboard is open while the batch runs and follows it by push, no reload.
    stack.pipeline.sim.setBehaviour('all', { latencyMs: 3000 });
    let id: string;
    try {
      const others = ['Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0010.jpg'].map((f) => ({ base64: readFileSync(new URL(`../fixtures/photos/${f}`, import.meta.url)).toString('base64') }));
      const submitted = await stack.pipeline.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(key.key), payload: { items: [{ base64: PHOTO, name: '=evil.jpg' }, ...others], modules: ['dating'] } });
      expect(submitted.statusCode, submitted.body).toBe(202);
      id = submitted.json().id as string;
      await page.goto(stack.url);
      const row = page.getByTestId(`batch-${id}`);
      await expect.poll(() => row.isVisible(), { timeout: 30_000 }).toBe(true);
      expect(await row.textContent()).toContain('running');
      await expect.poll(() => row.locator('progress').getAttribute('value'), { timeout: 60_000, interval: 100 }).toBe('4');
      // The batch is completed a moment after its last photo (its workflow closes it), then pushed.
      await expect.poll(() => row.textContent(), { timeout: 30_000, interval: 100 }).toContain('completed');
      expect(await row.textContent()).toContain('4 done, 0 failed, 0 pending · 4 credits');
      expect(await row.getByRole('link', { name: 'csv' }).getAttribute('href')).toBe(`/api/v1/batch/${id}/export?format=csv`);
      expect(await seriousA11yViolations(page)).toEqual([]);
    } finally {
      stack.pipeline.sim.reset();
    }

    const csv = await fetch(`${stack.url}/api/v1/batch/${id}/export?format=csv`, { headers: { cookie } });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-disposition')).toBe(`attachment; filename="${id}.csv"`);
    const text = (await csv.text()).replace(/^\uFEFF/, '');
    // Every field quoted (docs/decisions.md, "Batch exports: the writers").
    expect(text.split('\r\n')[0]).toBe(['#', 'Source', 'Status', 'SHA-256', 'Error', 'Moderation', 'Flagged', 'Estimated date', 'Year', 'Earliest year', 'Latest year', 'Date confidence', 'Season', 'Holiday'].map((h) => `"${h}"`).join(','));
    expect(text.split('\r\n')[1]).toMatch(/^"1","'=evil\.jpg","done","[0-9a-f]{64}","",/);
    expect((await fetch(`${stack.url}/api/v1/batch/${id}/export?format=docx`, { headers: { cookie } })).status).toBe(400);
    expect((await fetch(`${stack.url}/api/v1/batch/${id}/export?format=csv`)).status).toBe(401);

    const other = await browser.newContext();
    await signUpAndConfirm(await other.newPage(), newEmail());
    const otherCookie = (await other.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    const refused = await fetch(`${stack.url}/api/v1/batch/${id}/export?format=csv`, { headers: { cookie: otherCookie } });
    expect(refused.status).toBe(404);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    await other.close();
    await context.close();
  });
});

describe('a batch submitted from the console', () => {
  beforeEach(() => stack.resetSignInThrottle());
  it('uploads 120 photos chosen in the browser, each with its own progress, follows the batch to 100 % and downloads xlsx and csv that read back whole', async () => {
    const context = await browser.newContext({ acceptDownloads: true });
    const page = await context.newPage();
    await signUpAndConfirm(page, newEmail());
    const ws = await workspaceOf(context);
    const dir = mkdtempSync(path.join(tmpdir(), 'lenstack-120-'));
    const files = (await distinctPhotos(5000, 120)).map((b64, i) => {
      const file = path.join(dir, `photo-${String(i + 1).padStart(3, '0')}.jpg`);
      writeFileSync(file, Buffer.from(b64, 'base64'));
      return file;
    });

    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Batches' }).click();
    await page.getByRole('button', { name: 'New batch' }).click();
    await page.getByLabel('Choose photos').setInputFiles(files);
    const list = page.getByTestId('uploads').locator('li');
    await expect.poll(() => list.count()).toBe(120);
    expect(await list.first().textContent()).toContain('photo-001.jpg');
    expect(await list.first().locator('progress').getAttribute('aria-label')).toBe('photo-001.jpg uploaded');
    await page.getByLabel('Lenses').selectOption('memorial');
    if (SHOTS) await shot(page, 'new-batch');
    await page.getByRole('button', { name: 'Upload 120 and start the batch' }).click();
    await expect.poll(() => page.getByRole('status').textContent(), { timeout: 60_000 }).toMatch(/^Batch bat_\S+ started with 120 photos\.$/);
    const id = /Batch (bat_\S+) started/.exec((await page.getByRole('status').textContent())!)![1]!;

    // The dashboard follows it by push to 100 %.
    const row = page.getByTestId(`batch-${id}`);
    await expect.poll(() => row.locator('progress').getAttribute('value'), { timeout: 120_000, interval: 250 }).toBe('120');
    // The batch is completed a moment after its last photo (its workflow closes it), then pushed.
      await expect.poll(() => row.textContent(), { timeout: 30_000, interval: 100 }).toContain('completed');
    expect(await row.textContent()).toContain('120 done, 0 failed, 0 pending');
    expect(await seriousA11yViolations(page)).toEqual([]);

    const download = async (format: 'xlsx' | 'csv') => {
      const [file] = await Promise.all([page.waitForEvent('download'), row.getByRole('link', { name: format }).click()]);
      expect(file.suggestedFilename()).toBe(`${id}.${format}`);
      return readFileSync((await file.path())!);
    };
    const names = files.map((f) => path.basename(f));
    const records = parseCsv(await download('csv'), { bom: true }) as string[][];
    expect(records).toHaveLength(121);
    expect(records[0]!.slice(0, 5)).toEqual(['#', 'Source', 'Status', 'SHA-256', 'Error']);
    expect(records[0]).toContain('Year');
    expect(records.slice(1).map((r) => r[1])).toEqual(names);
    expect(records.slice(1).every((r) => r[2] === 'done' && /^[0-9a-f]{64}$/.test(r[3]!))).toBe(true);
    expect(new Set(records.slice(1).map((r) => r[3])).size).toBe(120);

    const wb = new ExcelJS.Workbook();
    await wb.xlsx.load((await download('xlsx')) as unknown as ArrayBuffer);
    const sheet = wb.worksheets[0]!;
    expect(sheet.rowCount).toBe(121);
    expect((sheet.getRow(1).values as unknown[]).slice(1)).toEqual(records[0]);
    expect(Array.from({ length: 120 }, (_, k) => sheet.getRow(k + 2).getCell(2).value)).toEqual(names);

    // Billed like any batch, the uploads gone once taken.
    const summary = await stack.pipeline.db.query<{ credits: number }>('SELECT coalesce(sum(credits), 0)::int AS credits FROM batch_items WHERE batch_id = $1', [id]);
    expect(summary.rows[0]!.credits).toBeGreaterThan(0);
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ community: 1000 - summary.rows[0]!.credits, reserved: 0 });
    expect(await checkInvariants(stack.pipeline.db, ws)).toEqual([{ userId: ws, ok: true, problems: [] }]);
    expect((await stack.pipeline.db.query('SELECT 1 FROM uploads WHERE user_id = $1 AND person_id IS NOT NULL', [ws])).rowCount).toBe(0);
    await context.close();
  }, 240_000);

  it('resumes an upload whose connection dropped from the bytes the server has; keeps uploads to their workspace, the same site and the quota', async () => {
    const context = await browser.newContext();
    await signUpAndConfirm(await context.newPage(), newEmail());
    const ws = await workspaceOf(context);
    const cookie = (await context.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    const tus = (extra: Record<string, string> = {}) => ({ cookie, origin: stack.url, 'tus-resumable': '1.0.0', ...extra });
    const meta = (workspace: string) => `workspace ${Buffer.from(workspace).toString('base64')},filename ${Buffer.from('nikon.jpg').toString('base64')}`;
    const bytes = readFileSync(new URL('../fixtures/photos/Nikon_D70.jpg', import.meta.url));

    const created = await fetch(`${stack.url}/api/v1/uploads`, { method: 'POST', headers: tus({ 'upload-length': String(bytes.length), 'upload-metadata': meta(ws) }) });
    expect(created.status).toBe(201);
    const location = new URL(created.headers.get('location')!, stack.url);
    const uploadId = location.pathname.split('/').pop()!;
    expect(uploadId).toMatch(/^upl_[0-9a-f]{32}$/);
    // The upload service's datastore (uploads/tus.ts uploadDatastore): the directory beside the blob store.
    const pc = stack.pipeline.config;
    const datastore = path.join(path.dirname(path.resolve(pc.BLOB_DIR)), `${path.basename(pc.BLOB_DIR)}-uploads`);

    // The connection drops a third of the way in: the server keeps what arrived.
    const third = Math.floor(bytes.length / 3);
    await new Promise<void>((resolve) => {
      const req = http.request(location, { method: 'PATCH', headers: tus({ 'upload-offset': '0', 'content-type': 'application/offset+octet-stream', 'content-length': String(bytes.length) }) });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(bytes.subarray(0, third));
      // Dropped once the server has written what was sent (not before: unread bytes die with the socket).
      const landed = setInterval(() => {
        if ((statSync(path.join(datastore, uploadId), { throwIfNoEntry: false })?.size ?? 0) >= third) {
          clearInterval(landed);
          req.destroy();
        }
      }, 10);
    });
    const offset = async () => Number((await fetch(location, { method: 'HEAD', headers: tus() })).headers.get('upload-offset'));
    await expect.poll(offset, { timeout: 10_000 }).toBeGreaterThan(0);
    const at = await offset();
    expect(at).toBe(third);
    // The rest, from there.
    const rest = await fetch(location, { method: 'PATCH', headers: tus({ 'upload-offset': String(at), 'content-type': 'application/offset+octet-stream' }), body: bytes.subarray(at) });
    expect(rest.status).toBe(204);
    expect(rest.headers.get('upload-offset')).toBe(String(bytes.length));

    // Someone of another workspace cannot see it, write to it, or start a batch with it.
    const other = await browser.newContext();
    await signUpAndConfirm(await other.newPage(), newEmail());
    const otherWs = await workspaceOf(other);
    const otherCookie = (await other.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    expect((await fetch(location, { method: 'HEAD', headers: { ...tus(), cookie: otherCookie } })).status).toBe(404);
    const stolen = await fetch(`${stack.url}/api/v1/workspaces/${otherWs}/batches`, {
      method: 'POST',
      headers: { cookie: otherCookie, origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ preset: 'quick-scan', uploads: [{ id: uploadId, name: 'mine now.jpg' }] }),
    });
    expect(stolen.status).toBe(400);
    expect((await fetch(`${stack.url}/api/v1/uploads`, { method: 'POST', headers: { ...tus({ 'upload-length': '10', 'upload-metadata': meta(ws) }), cookie: otherCookie } })).status).toBe(404);
    // Nor by naming its own upload first and this one where tus would read the id.
    const own = await fetch(`${stack.url}/api/v1/uploads`, { method: 'POST', headers: { ...tus({ 'upload-length': '10', 'upload-metadata': meta(otherWs) }), cookie: otherCookie } });
    expect(own.status).toBe(201);
    const smuggled = `${new URL(own.headers.get('location')!, stack.url).href}?x=/${uploadId}`;
    expect((await fetch(smuggled, { method: 'HEAD', headers: { ...tus(), cookie: otherCookie } })).status).toBe(404);
    await other.close();
    // A cross-site page cannot append to it with the person's cookie.
    const crossSite = await fetch(location, { method: 'PATCH', headers: { ...tus({ 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }), origin: 'https://evil.example' }, body: 'x' });
    expect(crossSite.status).toBe(403);

    // The owner's batch takes the whole file: the same bytes, stored once.
    const started = await fetch(`${stack.url}/api/v1/workspaces/${ws}/batches`, {
      method: 'POST',
      headers: { cookie, origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ preset: 'quick-scan', uploads: [{ id: uploadId, name: 'nikon.jpg' }] }),
    });
    expect(started.status, await started.clone().text()).toBe(202);
    const batchId = ((await started.json()) as { id: string }).id;
    const item = await stack.pipeline.db.query<{ sha256: string }>(`SELECT ref->>'sha256' AS sha256 FROM batch_items WHERE batch_id = $1`, [batchId]);
    expect(item.rows[0]!.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    // Taken once: a second batch naming it is refused.
    const again = await fetch(`${stack.url}/api/v1/workspaces/${ws}/batches`, {
      method: 'POST',
      headers: { cookie, origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ preset: 'quick-scan', uploads: [{ id: uploadId, name: 'nikon.jpg' }] }),
    });
    expect(again.status).toBe(400);

    // Declared sizes count against the person's quota (160 MiB here) before a byte arrives.
    const declare = (size: number) => fetch(`${stack.url}/api/v1/uploads`, { method: 'POST', headers: tus({ 'upload-length': String(size), 'upload-metadata': meta(ws) }) });
    const held = [];
    for (let k = 0; k < 3; k++) {
      const r = await declare(50 * 1024 * 1024);
      expect(r.status).toBe(201);
      held.push(new URL(r.headers.get('location')!, stack.url).pathname.split('/').pop()!);
    }
    const over = await declare(50 * 1024 * 1024);
    expect(over.status).toBe(413);
    expect(await over.text()).toContain('start a batch with the finished ones first');
    // Ending them (tus DELETE) gives their room back.
    for (const id of held) expect((await fetch(`${stack.url}/api/v1/uploads/${id}`, { method: 'DELETE', headers: tus() })).status).toBe(204);
    expect((await declare(1024)).status).toBe(201);
    await context.close();
  }, 60_000);
});
