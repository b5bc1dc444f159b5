import type { Browser } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../core/config.ts';
import { MAIL_PER_RECIPIENT } from '../../web/mail.ts';
import { startWeb } from '../../web/server.ts';
import { testConfig } from '../harness/env.ts';
import { consoleSuite, type ConsoleStack } from '../web/console-stack.ts';
import { browserCookies, consoleCall, cookieFrom, emailMaker, joinWorkspace, PASSWORD, type Person, signUpOverHttp } from '../web/people.ts';

/**
 * Holes an attacker found in the console (issue 21, items 5 and 8), each through HTTP against the
 * real console server, its real sign-in and a real SMTP server; each was seen to succeed before
 * its fix (see docs/reliability.md "The console's small holes").
 */
let stack: ConsoleStack;
let browser: Browser;
consoleSuite((s, b) => void ([stack, browser] = [s, b]));

const newEmail = emailMaker('hole');

describe('CSRF on the decoded route', () => {
  let person: Person;
  beforeAll(async () => {
    person = await signUpOverHttp(stack, newEmail());
  });

  it('refuses a cross-site POST /%61pi/v1/workspaces with the session cookie, and makes no workspace', async () => {
    const before = await stack.pipeline.db.query('SELECT count(*)::int AS n FROM workspace_members m JOIN console_users p ON p.id = m.console_user_id WHERE p.email = $1', [person.email]);
    for (const path of ['/%61pi/v1/workspaces', '/api/v1/%77orkspaces', '/API/v1/workspaces', '//api/v1/workspaces']) {
      const res = await fetch(`${stack.url}${path}`, {
        method: 'POST',
        headers: { cookie: person.cookie, origin: 'http://evil.example', 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Planted by evil.example' }),
      });
      // Whatever the router makes of the path, a cross-site write is refused before it runs.
      expect(res.status, path).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('FORBIDDEN');
    }
    const after = await stack.pipeline.db.query('SELECT count(*)::int AS n FROM workspace_members m JOIN console_users p ON p.id = m.console_user_id WHERE p.email = $1', [person.email]);
    expect(after.rows[0].n).toBe(before.rows[0].n);
    // The same request from the console's own page works.
    const own = await fetch(`${stack.url}/%61pi/v1/workspaces`, {
      method: 'POST',
      headers: { cookie: person.cookie, origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Mine' }),
    });
    expect(own.status).toBe(201);
  });

  it('checks every unsafe method, DELETE and PATCH included, and exempts only the signed Stripe webhook', async () => {
    const key = await fetch(`${stack.url}/api/v1/workspaces/${person.workspaceId}/keys`, {
      method: 'POST',
      headers: { cookie: person.cookie, origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'test' }),
    });
    const { id } = (await key.json()) as { id: string };
    const del = await fetch(`${stack.url}/%61pi/v1/workspaces/${person.workspaceId}/keys/${id}`, { method: 'DELETE', headers: { cookie: person.cookie, origin: 'http://evil.example' } });
    expect(del.status).toBe(403);
    const revoked = await stack.pipeline.db.query('SELECT revoked_at FROM api_keys WHERE id = $1', [id]);
    expect(revoked.rows[0].revoked_at).toBeNull();
    const patch = await fetch(`${stack.url}/%61pi/v1/workspaces/${person.workspaceId}/members/x`, { method: 'PATCH', headers: { cookie: person.cookie, 'sec-fetch-site': 'cross-site' } });
    expect(patch.status).toBe(403);
    // The webhook answers by its signature (400 without one), not by origin.
    const hook = await fetch(`${stack.url}/%61pi/v1/stripe/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', origin: 'https://stripe.example' }, body: '{}' });
    expect(hook.status).toBe(400);
  });
});

const post = (path: string, body: unknown, cookie = '') =>
  fetch(`${stack.url}${path}`, { method: 'POST', headers: { origin: stack.url, 'content-type': 'application/json', ...(cookie ? { cookie } : {}) }, body: JSON.stringify(body) });
const linkIn = (text: string) => /https?:\/\/\S+/.exec(text)![0];

describe('names in mail', () => {
  const hostile = `Ada\n\nURGENT: your account is locked, sign in at http://evil.example/login?x=1 or www.evil.example\r\n${'A'.repeat(60_000)}`;

  it('refuses a 60,000-character display name with line breaks and links at sign-up, and creates nobody', async () => {
    const email = newEmail();
    const res = await post('/api/v1/auth/sign-up/email', { name: hostile, email, password: PASSWORD });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('name') });
    expect((await stack.pipeline.db.query('SELECT 1 FROM console_users WHERE email = $1', [email])).rowCount).toBe(0);
    expect((await post('/api/v1/auth/sign-up/email', { name: 'Ada\u202Eevil', email, password: PASSWORD })).status).toBe(400);
    expect((await post('/api/v1/auth/sign-up/email', { name: 'Ada Lovelace-Byron', email, password: PASSWORD })).status).toBe(200);
  });

  it('puts no line break, link or address of a person’s making into an invitation mail', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    // A name written before the bound (or by another door): the mail still carries none of it raw.
    await stack.pipeline.db.query('UPDATE console_users SET name = $2 WHERE email = $1', [owner.email, hostile]);
    expect((await consoleCall(stack, owner, 'POST', '/api/v1/workspaces', { name: 'Acme\nhttp://evil.example' })).status).toBe(400);
    const ws = (await (await consoleCall(stack, owner, 'POST', '/api/v1/workspaces', { name: 'Visit evil.example/pay now' })).json()) as { id: string };
    const invitee = newEmail();
    expect((await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${ws.id}/invitations`, { email: invitee })).status).toBe(201);
    const mail = await stack.mail.waitFor((m) => m.to.includes(invitee));
    const lines = mail.text.split('\n');
    const intro = lines.find((l) => l.includes('invited you'))!;
    expect(intro).toBeDefined();
    expect(intro).not.toMatch(/https?:\/\/|evil\.example|www\./);
    expect(intro).toContain('evil[.]example');
    expect(intro).toContain(`<${owner.email}>`);
    expect(intro.length).toBeLessThan(400);
    expect(mail.text.length).toBeLessThan(1000);
    // The only link is the console's own.
    expect(mail.text.match(/https?:\/\/\S+/g)).toEqual([expect.stringMatching(new RegExp(`^${stack.url}/invitations/accept\\?token=inv_`))]);
    expect(mail.subject).toBe('You are invited to Visit evil[.]example/pay now on Lenstack');
  });
});

describe('invitation addresses', () => {
  it('refuses <svg/onload=…>@example.com with 400 and keeps no invitation', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    for (const email of ['<svg/onload=alert(1)>@example.com', '"a b"@example.com', 'a@b', 'x@example.com\r\nBcc: y@example.com', 'ä@example.com']) {
      const res = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/invitations`, { email });
      expect(res.status, email).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('VALIDATION_FAILED');
    }
    expect((await stack.pipeline.db.query('SELECT 1 FROM workspace_invitations WHERE workspace_id = $1', [owner.workspaceId])).rowCount).toBe(0);
  });
});

describe('mail per recipient', () => {
  it(`12 sign-ups for an existing address send at most ${MAIL_PER_RECIPIENT.limit} "you already have an account" mails`, async () => {
    const victim = await signUpOverHttp(stack, newEmail());
    for (let i = 0; i < 12; i++) {
      // Each answers like a new sign-up: nothing tells the sender that mail stopped.
      expect((await post('/api/v1/auth/sign-up/email', { name: 'X', email: victim.email, password: `${PASSWORD} ${i}` })).status).toBe(200);
    }
    await stack.mail.waitFor((m) => m.to.includes(victim.email) && m.subject === 'You already have a Lenstack account');
    const count = () => stack.mail.messages().filter((m) => m.to.includes(victim.email) && m.subject === 'You already have a Lenstack account').length;
    await expect.poll(count).toBe(MAIL_PER_RECIPIENT.limit);
    // Another recipient is not limited by it.
    const other = await signUpOverHttp(stack, newEmail());
    await post('/api/v1/auth/sign-up/email', { name: 'X', email: other.email, password: PASSWORD });
    await stack.mail.waitFor((m) => m.to.includes(other.email) && m.subject === 'You already have a Lenstack account');
    expect(count()).toBe(MAIL_PER_RECIPIENT.limit);
  });
});

describe('tokens out of logs and bodies', () => {
  it('logs request paths without their query strings (magic-link tokens, verification JWTs, OAuth codes)', async () => {
    const secrets = ['MAGICSECRET0123456789', 'eyJhbGciOiJIUzI1NiJ9.JWTSECRET.sig', 'OAUTHCODESECRET42'];
    await fetch(`${stack.url}/api/v1/auth/magic-link/verify?token=${secrets[0]}&callbackURL=/`, { redirect: 'manual' });
    await fetch(`${stack.url}/api/v1/auth/verify-email?token=${secrets[1]}&callbackURL=/`, { redirect: 'manual' });
    await fetch(`${stack.url}/api/v1/auth/oauth2/callback/github?code=${secrets[2]}&state=abc`, { redirect: 'manual' });
    const lines = stack.logs.filter((l) => l.includes('/api/v1/auth/magic-link/verify') || l.includes('/api/v1/auth/verify-email') || l.includes('/oauth2/callback/github'));
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const secret of secrets) expect(stack.logs.filter((l) => l.includes(secret))).toEqual([]);
    expect(lines.some((l) => l.includes('"url":"/api/v1/auth/magic-link/verify?[redacted]"'))).toBe(true);
  });

  it('keeps the session token out of the JSON of sign-in, get-session and list-sessions (the cookie carries it)', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const signIn = await post('/api/v1/auth/sign-in/email', { email: person.email, password: PASSWORD });
    expect(signIn.status).toBe(200);
    const cookie = cookieFrom(signIn);
    const token = decodeURIComponent(/session_token=([^;]+)/.exec(cookie)![1]!).split('.')[0]!;
    expect(token.length).toBeGreaterThan(20);
    const bodies = [
      await signIn.text(),
      await (await fetch(`${stack.url}/api/v1/auth/get-session`, { headers: { cookie } })).text(),
      await (await fetch(`${stack.url}/api/v1/auth/list-sessions`, { headers: { cookie } })).text(),
    ];
    for (const body of bodies) {
      expect(body.length).toBeGreaterThan(10);
      expect(body).not.toContain(token);
      expect(body).not.toContain('"token"');
    }
    expect(JSON.parse(bodies[1]!)).toMatchObject({ user: { email: person.email }, session: { userId: expect.any(String) } });
    expect((JSON.parse(bodies[2]!) as unknown[]).length).toBeGreaterThanOrEqual(2);
    // The cookie still signs in.
    expect((await fetch(`${stack.url}/api/v1/session`, { headers: { cookie } })).status).toBe(200);
  });
});

describe('magic links', () => {
  it('a newer sign-in link makes the older one useless', async () => {
    const email = newEmail();
    const links: string[] = [];
    for (let i = 0; i < 2; i++) {
      expect((await post('/api/v1/auth/sign-in/magic-link', { email, callbackURL: '/' })).status).toBe(200);
      const mail = await stack.mail.waitFor((m) => m.to.includes(email) && m.subject === 'Your Lenstack sign-in link' && !links.includes(linkIn(m.text)));
      links.push(linkIn(mail.text));
    }
    const older = await fetch(links[0]!, { redirect: 'manual' });
    expect(older.status).toBe(302);
    expect(older.headers.get('location')).toContain('error=');
    expect(older.headers.getSetCookie().some((c) => /session_token=[^;]+/.test(c) && !/session_token=;/.test(c))).toBe(false);
    const newer = await fetch(links[1]!, { redirect: 'manual' });
    expect(newer.status).toBe(302);
    expect(newer.headers.get('location')).not.toContain('error=');
    const cookie = cookieFrom(newer);
    expect((await fetch(`${stack.url}/api/v1/session`, { headers: { cookie } })).status).toBe(200);
  });
});

describe('uploads belong to their creator', () => {
  it("another admin of the same workspace cannot see, write into or take someone's unfinished upload", async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const other = await signUpOverHttp(stack, newEmail());
    await joinWorkspace(stack, owner, owner.workspaceId, other, 'admin');
    const ws = owner.workspaceId;
    const tus = (cookie: string, extra: Record<string, string> = {}) => ({ cookie, origin: stack.url, 'tus-resumable': '1.0.0', ...extra });
    const created = await fetch(`${stack.url}/api/v1/uploads`, { method: 'POST', headers: tus(owner.cookie, { 'upload-length': '8', 'upload-metadata': `workspace ${Buffer.from(ws).toString('base64')}` }) });
    expect(created.status).toBe(201);
    const at = new URL(created.headers.get('location')!, stack.url);
    const id = at.pathname.split('/').pop()!;
    expect((await fetch(at, { method: 'PATCH', headers: tus(owner.cookie, { 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }), body: 'abcd' })).status).toBe(204);

    // The other admin: offset, append, terminate, take — all as if the upload did not exist.
    expect((await fetch(at, { method: 'HEAD', headers: tus(other.cookie) })).status).toBe(404);
    expect((await fetch(at, { method: 'PATCH', headers: tus(other.cookie, { 'upload-offset': '4', 'content-type': 'application/offset+octet-stream' }), body: 'EVIL' })).status).toBe(404);
    expect((await fetch(at, { method: 'DELETE', headers: tus(other.cookie) })).status).toBe(404);
    const taken = await consoleCall(stack, other, 'POST', `/api/v1/workspaces/${ws}/batches`, { preset: 'quick-scan', uploads: [{ id, name: 'x.jpg' }] });
    expect(taken.status).toBe(400);
    // The creator's upload is as they left it.
    const head = await fetch(at, { method: 'HEAD', headers: tus(owner.cookie) });
    expect(head.headers.get('upload-offset')).toBe('4');
    expect((await stack.pipeline.db.query('SELECT taken_at FROM uploads WHERE id = $1', [id])).rows).toEqual([{ taken_at: null }]);
  });
});

describe('Content-Security-Policy', () => {
  it('every page carries a strict policy, and the built console runs under it with no violation', async () => {
    for (const path of ['/', '/sign-in', '/api/v1/auth-methods']) {
      const csp = (await fetch(`${stack.url}${path}`)).headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
    }
    const person = await signUpOverHttp(stack, newEmail());
    const context = await browser.newContext();
    await context.addCookies(browserCookies(stack, person));
    // Violations are collected in the page (the event the browser fires for each one).
    await context.addInitScript(() => {
      const g = globalThis as unknown as { __csp: string[]; addEventListener(t: string, f: (e: { violatedDirective: string; blockedURI: string }) => void): void };
      g.__csp = [];
      g.addEventListener('securitypolicyviolation', (e) => g.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const page = await context.newPage();
    const violations = () => page.evaluate(() => (globalThis as unknown as { __csp: string[] }).__csp);
    await page.goto(stack.url);
    await expect.poll(() => page.getByTestId('available').textContent(), { timeout: 15_000 }).toBe('1,000');
    // Batches is a section of its own since issue 26 (the overview only links to it).
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Batches' }).click();
    await page.getByRole('button', { name: 'New batch' }).click();
    await expect.poll(() => page.getByLabel('Choose photos').count(), { timeout: 15_000 }).toBe(1);
    expect(await violations()).toEqual([]);
    // The Usage section's chart (Chartist) sets one style attribute, allowed by its hash alone.
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Usage' }).click();
    await expect.poll(() => page.getByTestId('lens-chart').locator('svg').count(), { timeout: 15_000 }).toBe(1);
    expect(await page.getByTestId('lens-chart').locator('svg').getAttribute('style')).toBe('width: 100%; height: 100%;');
    expect(await violations()).toEqual([]);
    for (const path of ['/sign-up', '/dev/mailbox', '/sign-in']) {
      await page.goto(`${stack.url}${path}`);
      await expect.poll(() => page.getByRole('heading', { level: 1 }).count(), { timeout: 15_000 }).toBeGreaterThan(0);
      expect(await violations(), path).toEqual([]);
    }
    // The listener does see a violation: an inline script is refused.
    await page.evaluate(() => {
      const d = (globalThis as unknown as { document: { createElement(t: string): { textContent: string }; body: { append(n: unknown): void } } }).document;
      const el = d.createElement('script');
      el.textContent = 'window.__ran = 1';
      d.body.append(el);
    });
    await expect.poll(violations).toEqual([expect.stringContaining('script-src')]);
    await context.close();
  });
});

describe('the development mailbox', () => {
  it('is served only when asked for, on a loopback-bound console', async () => {
    const base = testConfig({ AUTH_SECRET: 'test-auth-secret-0123456789abcdef0123456789', WEB_PORT: 0, SMTP_URL: undefined });
    // Left unset (NODE_ENV unset, no SMTP_URL) on all interfaces: refused, not a public mailbox.
    await expect(startWeb({ ...base, HOST: '0.0.0.0' }, { logger: false })).rejects.toBeInstanceOf(ConfigError);
    await expect(startWeb({ ...base, HOST: '127.0.0.1' }, { logger: false })).rejects.toThrow(/SMTP_URL/);
    await expect(startWeb({ ...base, HOST: '0.0.0.0', DEV_MAILBOX: true }, { logger: false })).rejects.toThrow(/not loopback/);
    const web = await startWeb({ ...base, HOST: '127.0.0.1', DEV_MAILBOX: true }, { logger: false });
    try {
      const port = (web.app.server.address() as { port: number }).port;
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/dev/mailbox`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { development: boolean }).development).toBe(true);
    } finally {
      await web.close();
    }
  });
});
