import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { LightMyRequestResponse } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, seriousA11yViolations } from '../web/browser.ts';
import { getBalance } from '../../credits/ledger.ts';
import { RecordingPaymentGateway } from '../../payments/recording-gateway.ts';
import { startConsoleStack, type ConsoleStack } from '../web/console-stack.ts';

/**
 * Issue 21, items 3, 4 and 6, as an attacker on the console's HTTP surface: free credits from one
 * mailbox under many addresses, a person locked out by someone else's guesses, and an account
 * pre-registered with someone else's address. The console runs on the real stack (Postgres,
 * Redis, a real SMTP server the test reads); each request names its client address, as a socket
 * from that address would.
 */
let stack: ConsoleStack;
beforeAll(async () => {
  stack = await startConsoleStack();
}, 120_000);
afterAll(async () => stack?.close());

const PASSWORD = 'lantern orbit cactus violin';
let counter = 0;
const unique = () => `${process.pid}-${Date.now()}-${counter++}`;
let nextIp = 1;
/** A client address nobody else in this file uses (198.18.0.0/15 is for benchmarks, never routed). */
const freshIp = () => `198.18.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;

interface Call {
  ip?: string;
  cookie?: string;
  body?: unknown;
}

async function request(method: 'GET' | 'POST' | 'DELETE', url: string, opts: Call = {}): Promise<LightMyRequestResponse> {
  return stack.web.inject({
    method,
    url,
    remoteAddress: opts.ip ?? freshIp(),
    headers: { origin: stack.url, ...(opts.cookie ? { cookie: opts.cookie } : {}), ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(opts.body !== undefined ? { payload: JSON.stringify(opts.body) } : {}),
  });
}

/** The cookies a response sets, as a Cookie header (empty when it sets none or only clears them). */
function cookiesOf(res: LightMyRequestResponse): string {
  const set = res.headers['set-cookie'];
  const list = set === undefined ? [] : Array.isArray(set) ? set : [set];
  return list
    .map((c) => c.split(';')[0]!)
    .filter((c) => !c.endsWith('='))
    .join('; ');
}

/** The first link of the newest mail to `email` whose subject is `subject`, as a path on the console. */
async function linkFrom(email: string, subject: string, after = 0): Promise<string> {
  const mail = await stack.mail.waitFor((m) => m.id > after && m.to.includes(email.toLowerCase()) && m.subject === subject);
  const link = /https?:\/\/\S+/.exec(mail.text)![0];
  const url = new URL(link);
  return `${url.pathname}${url.search}`;
}
const lastMailId = () => stack.mail.messages()[0]?.id ?? 0;

async function signUp(email: string, password = PASSWORD, ip = freshIp()): Promise<void> {
  const res = await request('POST', '/api/v1/auth/sign-up/email', { ip, body: { name: 'Ada', email, password, callbackURL: '/' } });
  expect(res.statusCode, res.body).toBe(200);
}

async function signIn(email: string, password = PASSWORD, ip = freshIp()): Promise<{ status: number; cookie: string; body: string }> {
  const res = await request('POST', '/api/v1/auth/sign-in/email', { ip, body: { email, password } });
  return { status: res.statusCode, cookie: cookiesOf(res), body: res.body };
}

/** Sign up with a password, confirm from the mail, sign in: the signed-in person's cookie. */
async function confirmedPerson(email: string): Promise<string> {
  const before = lastMailId();
  await signUp(email);
  const confirm = await request('GET', await linkFrom(email, 'Confirm your e-mail address for Lenstack', before));
  expect(confirm.statusCode).toBe(302);
  const signedIn = await signIn(email);
  expect(signedIn.status, signedIn.body).toBe(200);
  return signedIn.cookie;
}

async function session(cookie: string): Promise<{ status: number; workspaces: Array<{ id: string; name: string; role: string }> }> {
  const res = await request('GET', '/api/v1/session', { cookie });
  return { status: res.statusCode, workspaces: res.statusCode === 200 ? (res.json() as { workspaces: Array<{ id: string; name: string; role: string }> }).workspaces : [] };
}

describe('free credits: one sign-up grant per mailbox, one first-pack bonus per person (item 6)', () => {
  it("db's mailbox_key: lowercase, +tag dropped, Gmail's dots and googlemail.com folded, other dots kept", async () => {
    const cases: Array<[string, string | null]> = [
      ['Ada+Work@Example.COM', 'ada@example.com'],
      ['  ada@example.com ', 'ada@example.com'],
      ['a.d.a+x@example.com', 'a.d.a@example.com'],
      ['A.D.A+x@GoogleMail.com', 'ada@gmail.com'],
      ['ada@gmail.com', 'ada@gmail.com'],
      ['ada-work@example.com', 'ada-work@example.com'],
      ['"odd@local"@example.com', '"odd@local"@example.com'],
      ['not an address', null],
      ['ada@', null],
    ];
    const r = await stack.pipeline.db.query<{ key: string | null }>('SELECT mailbox_key(a) AS key FROM unnest($1::text[]) WITH ORDINALITY AS t(a, n) ORDER BY n', [cases.map((c) => c[0])]);
    expect(r.rows.map((row) => row.key)).toEqual(cases.map((c) => c[1]));
  });

  it('three +tagged addresses of one mailbox earn 1,000 credits between them, not 3,000', async () => {
    const local = `ada${unique()}`;
    const addresses = [`${local}@example.test`, `${local}+two@example.test`, `${local.toUpperCase()}+three@Example.TEST`];
    let community = 0;
    for (const email of addresses) {
      const cookie = await confirmedPerson(email);
      const [ws] = (await session(cookie)).workspaces;
      community += (await getBalance(stack.pipeline.db, ws!.id)).community;
    }
    expect(community).toBe(1_000);
    // Another mailbox on the same domain is another person: its own 1,000.
    const other = await confirmedPerson(`bob${unique()}@example.test`);
    expect((await getBalance(stack.pipeline.db, (await session(other)).workspaces[0]!.id)).community).toBe(1_000);
  });

  it('Gmail: dots and googlemail.com deliver to one mailbox, so they earn one grant', async () => {
    const local = `adalovelace${unique().replace(/-/g, '')}`;
    const dotted = `${local.slice(0, 3)}.${local.slice(3, 7)}.${local.slice(7)}@gmail.com`;
    const first = await confirmedPerson(`${local}@gmail.com`);
    const second = await confirmedPerson(dotted.replace('@gmail.com', '+x@googlemail.com'));
    const balances = await Promise.all([first, second].map(async (c) => (await getBalance(stack.pipeline.db, (await session(c)).workspaces[0]!.id)).community));
    expect(balances).toEqual([1_000, 0]);
  });

  it('the 2x first-pack bonus is offered and granted once per person, not on each new workspace', async () => {
    const local = `buyer${unique()}`;
    const cookie = await confirmedPerson(`${local}@example.test`);
    const personal = (await session(cookie)).workspaces[0]!.id;
    const development = await stack.variant({ stripe: null, payments: new RecordingPaymentGateway(stack.pipeline.db) });
    const headers = { cookie, origin: stack.url, 'content-type': 'application/json' };
    const bonusOffered = async (ws: string) =>
      (development.inject({ method: 'GET', url: `/api/v1/workspaces/${ws}/packs`, headers }).then((r) => (r.json() as { packs: Array<{ name: string; bonusCredits: number }> }).packs.find((p) => p.name === 'starter')!.bonusCredits));
    const buy = async (ws: string, key: string) => {
      const res = await development.inject({ method: 'POST', url: `/api/v1/workspaces/${ws}/purchases`, headers, payload: { pack: 'starter', idempotencyKey: key } });
      expect(res.statusCode, res.body).toBe(201);
    };
    expect(await bonusOffered(personal)).toBe(1_000);
    await buy(personal, `first-${unique()}`);
    expect(await getBalance(stack.pipeline.db, personal)).toMatchObject({ purchased: 2_000 });

    const teams: string[] = [];
    for (const name of ['Side project', 'Another one']) {
      const made = await development.inject({ method: 'POST', url: '/api/v1/workspaces', headers, payload: { name } });
      expect(made.statusCode, made.body).toBe(201);
      teams.push((made.json() as { id: string }).id);
    }
    for (const ws of teams) {
      expect(await bonusOffered(ws)).toBe(0);
      await buy(ws, `again-${unique()}`);
      expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ purchased: 1_000 });
    }
    // A +tagged second account of the same mailbox is the same person too.
    const tagged = await confirmedPerson(`${local}+alt@example.test`);
    const taggedWs = (await session(tagged)).workspaces[0]!.id;
    expect(taggedWs).not.toBe(personal);
    const taggedHeaders = { cookie: tagged, origin: stack.url };
    const offer = await development.inject({ method: 'GET', url: `/api/v1/workspaces/${taggedWs}/packs`, headers: taggedHeaders });
    expect((offer.json() as { packs: Array<{ bonusCredits: number }> }).packs.map((p) => p.bonusCredits)).toEqual([0, 0, 0]);
  });
});

describe('lockout: failed passwords counted per account and per source apart (item 4)', () => {
  it("10 wrong passwords from 10 addresses do not wall her right password off: a fresh address gets a mailed link, and a link she asks for comes", async () => {
    const email = `target${unique()}@example.test`;
    const home = freshIp();
    await confirmedPerson(email);
    expect((await signIn(email, PASSWORD, home)).status).toBe(200);
    for (let i = 0; i < 10; i++) expect((await signIn(email, `wrong guess number ${i} here`)).status, `guess ${i + 1}`).toBe(401);

    // Her right password from a fresh address: before, 429 until the window passed.
    const before = lastMailId();
    const right = await request('POST', '/api/v1/auth/sign-in/email', { ip: freshIp(), body: { email, password: PASSWORD } });
    expect(right.statusCode, right.body).not.toBe(429);
    expect(right.statusCode).toBe(403);
    expect(cookiesOf(right)).toBe('');
    expect(right.json()).toMatchObject({ error: { code: 'FORBIDDEN', signInLinkSent: true } });
    // The link mailed to her signs her in (proof the guessers lack).
    const verify = await request('GET', await linkFrom(email, 'Your Lenstack sign-in link', before));
    expect(verify.statusCode).toBe(302);
    expect((await session(cookiesOf(verify))).status).toBe(200);

    // A guess from a fresh address gets the very same answer: no oracle for whether it was right.
    const guess = await request('POST', '/api/v1/auth/sign-in/email', { ip: freshIp(), body: { email, password: 'another wrong guess here' } });
    expect(guess.statusCode).toBe(403);
    expect({ ...guess.json().error, requestId: 'x' }).toEqual({ ...right.json().error, requestId: 'x' });

    // The link she is told to ask for: not counted with the failed passwords, so not 429.
    const link = await request('POST', '/api/v1/auth/sign-in/magic-link', { ip: freshIp(), body: { email, callbackURL: '/' } });
    expect(link.statusCode, link.body).toBe(200);
    // Where she signed in before, her password still works.
    expect((await signIn(email, PASSWORD, home)).status).toBe(200);
  });

  it('one source guessing is stopped at that source: 429 for the account from it, then for every account', async () => {
    const ip = freshIp();
    const victim = `guessed${unique()}@example.test`;
    for (let i = 0; i < 10; i++) expect((await signIn(victim, `wrong guess number ${i} here`, ip)).status).toBe(401);
    const pair = await signIn(victim, 'yet another wrong guess', ip);
    expect(pair.status).toBe(429);
    expect(pair.body).toContain('for this account from your network address');
    // Spraying other accounts from the same source: 10 more failures reach the per-source limit.
    for (let i = 0; i < 10; i++) expect((await signIn(`sprayed${unique()}@example.test`, `wrong guess number ${i} here`, ip)).status).toBe(401);
    const sprayed = await signIn(`sprayed${unique()}@example.test`, 'one wrong guess too many', ip);
    expect(sprayed.status).toBe(429);
    expect(sprayed.body).toContain('from your network address');
  });
});

describe('pre-registration takeover (item 3)', () => {
  it('confirming an address someone else signed up signs nobody in; a reset by mail takes the account back and ends their sessions', async () => {
    const victim = `victim${unique()}@example.test`;
    const attackerPassword = 'attacker chose this passphrase';
    const before = lastMailId();
    await signUp(victim, attackerPassword);
    // The victim clicks "Confirm" in the mail she did not ask for.
    const confirm = await request('GET', await linkFrom(victim, 'Confirm your e-mail address for Lenstack', before));
    expect(confirm.statusCode).toBe(302);
    expect(cookiesOf(confirm)).toBe('');
    // The attacker signs in with the password they chose.
    const attacker = await signIn(victim, attackerPassword);
    expect(attacker.status).toBe(200);

    // She asks for a new password by mail (before: 400 RESET_PASSWORD_DISABLED).
    const mark = lastMailId();
    const ask = await request('POST', '/api/v1/auth/request-password-reset', { body: { email: victim, redirectTo: '/reset-password' } });
    expect(ask.statusCode, ask.body).toBe(200);
    const resetLink = await linkFrom(victim, 'Set a new Lenstack password', mark);
    const landing = await request('GET', resetLink);
    expect(landing.statusCode).toBe(302);
    const token = new URL(String(landing.headers.location), stack.url).searchParams.get('token')!;
    expect(token).toBeTruthy();
    // The same password rules as at sign-up.
    const weak = await request('POST', '/api/v1/auth/reset-password', { body: { token, newPassword: 'passwordpassword' } });
    expect(weak.statusCode).toBe(400);
    const reset = await request('POST', '/api/v1/auth/reset-password', { body: { token, newPassword: 'her own fresh passphrase 2026' } });
    expect(reset.statusCode, reset.body).toBe(200);
    expect((await session(attacker.cookie)).status).toBe(401);
    expect((await signIn(victim, attackerPassword)).status).toBe(401);
    expect((await signIn(victim, 'her own fresh passphrase 2026')).status).toBe(200);
    // The link works once.
    expect((await request('POST', '/api/v1/auth/reset-password', { body: { token, newPassword: 'a third passphrase for me' } })).statusCode).toBe(400);
  });

  it('her account page lists the sign-in methods and sessions; she ends the stranger’s session and removes the password, never the e-mail link', async () => {
    const victim = `victim${unique()}@example.test`;
    const attackerPassword = 'attacker chose this passphrase';
    const before = lastMailId();
    await signUp(victim, attackerPassword);
    await request('GET', await linkFrom(victim, 'Confirm your e-mail address for Lenstack', before));
    const attacker = await signIn(victim, attackerPassword, '203.0.113.66');
    expect(attacker.status).toBe(200);
    // She signs in by a mailed link.
    const mark = lastMailId();
    expect((await request('POST', '/api/v1/auth/sign-in/magic-link', { body: { email: victim, callbackURL: '/' } })).statusCode).toBe(200);
    const her = cookiesOf(await request('GET', await linkFrom(victim, 'Your Lenstack sign-in link', mark)));
    const page = await request('GET', '/api/v1/account/security', { cookie: her });
    expect(page.statusCode, page.body).toBe(200);
    const security = page.json() as { methods: Array<{ id: string; kind: string; removable: boolean }>; sessions: Array<{ id: string; ipAddress: string; current: boolean }> };
    expect(security.methods.map((m) => [m.kind, m.removable])).toEqual([['email-link', false], ['password', true]]);
    expect(JSON.stringify(security)).not.toMatch(/token/i);
    const stranger = security.sessions.find((s) => s.ipAddress === '203.0.113.66')!;
    expect(stranger.current).toBe(false);
    expect(security.sessions.filter((s) => s.current)).toHaveLength(1);

    // Another person cannot end her sessions.
    const other = await confirmedPerson(`other${unique()}@example.test`);
    expect((await request('DELETE', `/api/v1/account/sessions/${stranger.id}`, { cookie: other })).statusCode).toBe(404);
    expect((await request('DELETE', `/api/v1/account/sessions/${stranger.id}`, { cookie: her })).statusCode).toBe(200);
    expect((await session(attacker.cookie)).status).toBe(401);

    expect((await request('DELETE', '/api/v1/account/methods/email-link', { cookie: her })).statusCode).toBe(403);
    const password = security.methods.find((m) => m.kind === 'password')!;
    const removed = await request('DELETE', `/api/v1/account/methods/${password.id}`, { cookie: her });
    expect(removed.statusCode, removed.body).toBe(200);
    expect((await signIn(victim, attackerPassword)).status).toBe(401);
    expect((await session(her)).status).toBe(200);
    const after = (await request('GET', '/api/v1/account/security', { cookie: her })).json() as { methods: Array<{ kind: string }> };
    expect(after.methods.map((m) => m.kind)).toEqual(['email-link']);
  });
});

/** LENSTACK_SCREENSHOTS=1 writes docs/screenshots/<page>-{desktop,phone}.png, as test/web/console.test.ts does. */
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

describe('the person’s path in a real browser (item 3)', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
    // Every browser here comes from 127.0.0.1, as the console suite's do.
    await stack.resetSignInThrottle();
  });
  afterAll(async () => browser?.close());

  it('forgot password: a link by mail, a new password, signed in with it', async () => {
    const email = `forgetful${unique()}@example.test`;
    await confirmedPerson(email);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${stack.url}/sign-in`);
    await page.getByLabel('E-mail address').fill(email);
    const mark = lastMailId();
    await page.getByRole('button', { name: 'Forgot your password?' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('set a new password');
    const link = await linkFrom(email, 'Set a new Lenstack password', mark);
    await page.goto(`${stack.url}${link}`);
    await page.waitForURL(/\/reset-password\?token=/);
    await page.getByLabel('New password').fill('short');
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('at least 15 characters');
    await page.getByLabel('New password').fill('a brand new passphrase 77');
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.waitForURL(/\/sign-in\?reset=1$/);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByLabel('Password').fill('a brand new passphrase 77');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(`${stack.url}/`);
    await expect.poll(() => page.getByTestId('available').textContent(), { timeout: 10_000 }).toBe('1,000');
    await context.close();
  }, 120_000);

  it('the account page lists methods and sessions, signs another session out and removes the password; no serious accessibility violations', async () => {
    const email = `careful${unique()}@example.test`;
    await confirmedPerson(email);
    const elsewhere = await browser.newContext();
    const other = await elsewhere.newPage();
    const signInIn = async (p: Page) => {
      await p.goto(`${stack.url}/sign-in`);
      await p.getByLabel('E-mail address').fill(email);
      await p.getByLabel('Password').fill(PASSWORD);
      await p.getByRole('button', { name: 'Sign in', exact: true }).click();
      await p.waitForURL(`${stack.url}/`);
    };
    await signInIn(other);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await signInIn(page);
    await page.getByRole('link', { name: 'Account' }).click();
    await page.waitForURL(`${stack.url}/account`);
    await expect.poll(() => page.getByTestId('methods').textContent()).toContain('Password');
    expect(await page.getByTestId('methods').textContent()).toContain(`Sign-in link by e-mail${email}`);
    const sessions = page.getByTestId('sessions').locator('tbody tr');
    await expect.poll(() => sessions.count()).toBe(3);
    expect(await page.getByTestId('sessions').textContent()).toContain('(this one)');
    await shot(page, 'account');
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.setViewportSize({ width: 390, height: 844 });
    const width = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(390);
    await page.setViewportSize({ width: 1280, height: 900 });

    // Sign out a session that is not this one: the other browser is signed out at once.
    await sessions.filter({ hasNotText: '(this one)' }).first().getByRole('button').click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('signed out');
    await expect.poll(() => sessions.count()).toBe(2);

    await page.getByRole('button', { name: 'Remove password' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Password removed');
    await expect.poll(() => page.getByTestId('methods').textContent()).not.toContain('Password');
    await expect.poll(() => sessions.count()).toBe(1);
    expect((await signIn(email)).status).toBe(401);
    const cookie = (await context.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    expect((await session(cookie)).status).toBe(200);
    const otherCookie = (await elsewhere.cookies(stack.url)).map((c) => `${c.name}=${c.value}`).join('; ');
    expect((await session(otherCookie)).status).toBe(401);
    await elsewhere.close();
    await context.close();
  }, 120_000);
});
