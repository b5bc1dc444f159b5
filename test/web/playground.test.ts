import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { screenshot, seriousA11yViolations } from './browser.ts';
import { consoleSuite, type ConsoleStack } from './console-stack.ts';
import { browserCookies, consoleCall, emailMaker, signUpOverHttp, type Person } from './people.ts';

/**
 * The console's Playground (issue 26 §2; docs/decisions.md "The console's Playground"): in
 * Debian's Chromium against the real console server, API, worker, Temporal and simulated vendors.
 */
let stack: ConsoleStack;
let browser: Browser;
consoleSuite((s, b) => {
  [stack, browser] = [s, b];
});

const newEmail = emailMaker('playground');
/** How long a poll waits for the page to catch up (a wait on a loaded machine, not a bound on speed). */
const WAIT = { timeout: 60_000 };
const run = promisify(execFile);

async function balance(person: Person): Promise<number> {
  const r = await stack.pipeline.db.query<{ b: string }>('SELECT community_balance + purchased_balance AS b FROM credit_accounts WHERE user_id = $1', [person.workspaceId]);
  return Number(r.rows[0]!.b);
}
/** Credits the ledger says were charged to the workspace (settlements), and how many reservations it holds. */
async function ledger(person: Person): Promise<{ charged: number; reserves: number }> {
  const r = await stack.pipeline.db.query<{ charged: string; reserves: string }>(
    `SELECT coalesce(sum(charged_delta), 0) AS charged, count(*) FILTER (WHERE kind = 'reserve') AS reserves FROM credit_ledger WHERE user_id = $1`,
    [person.workspaceId],
  );
  return { charged: Number(r.rows[0]!.charged), reserves: Number(r.rows[0]!.reserves) };
}

describe('Playground', () => {
  it('the preview says what a live run then charges (ledger and balance), a second run previews 0 new for 0 credits, the sandbox run is free, and the copied curl command answers the same lenses from the API', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const dir = mkdtempSync(join(tmpdir(), 'lenstack-playground-'));
    const photoPath = join(dir, "owner's photo.jpg");
    writeFileSync(photoPath, await sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer());
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.url });
    await ctx.addCookies(browserCookies(stack, owner));
    const page = await ctx.newPage();
    try {
      await page.goto(`${stack.url}/`);
      await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Playground' }).click();
      await expect.poll(() => page.url()).toBe(`${stack.url}/playground`);
      await page.getByLabel('Choose, drop or paste a photo').setInputFiles(photoPath);
      await page.getByRole('radio', { name: 'lenses' }).check();
      for (const lens of ['dating', 'location', 'describe']) await page.getByRole('checkbox', { name: new RegExp(`^${lens} `) }).check();
      const preview = page.locator('p.preview');
      await expect.poll(() => preview.textContent(), WAIT).toBe('3 lenses new, 0 already in your registry: 3 credits');

      // The sandbox: fixtures, nothing reserved or charged, and the registry is untouched.
      const before = { balance: await balance(owner), ledger: await ledger(owner) };
      await page.getByRole('button', { name: 'Run' }).click();
      await expect.poll(() => page.getByRole('heading', { name: 'Answer' }).count(), WAIT).toBe(1);
      expect(await page.locator('details pre').textContent()).toContain('sandbox: fixture data');
      expect({ balance: await balance(owner), ledger: await ledger(owner) }).toEqual(before);
      // (The preview is asked again after every run.)
      await expect.poll(() => preview.textContent(), WAIT).toBe('3 lenses new, 0 already in your registry: 3 credits');

      // Live: the credits charged are the preview's.
      expect(await seriousA11yViolations(page)).toEqual([]);
      await page.getByRole('radio', { name: /^live/ }).check();
      await page.getByRole('button', { name: 'Run' }).click();
      await expect.poll(() => page.getByText(/^3 credits charged/).count(), WAIT).toBe(1);
      expect(await balance(owner)).toBe(before.balance - 3);
      expect(await ledger(owner)).toEqual({ charged: before.ledger.charged + 3, reserves: before.ledger.reserves + 1 });
      for (const lens of ['dating', 'location', 'describe']) await expect.poll(() => page.getByRole('heading', { name: lens, level: 3 }).count()).toBe(1);

      // Again: every lens is in the registry now.
      await expect.poll(() => preview.textContent(), WAIT).toBe('0 lenses new, 3 already in your registry: 0 credits');
      await page.getByRole('button', { name: 'Run' }).click();
      await expect.poll(() => page.getByText(/^0 credits charged/).count(), WAIT).toBe(1);
      expect(await balance(owner)).toBe(before.balance - 3);
      // Each run is in the Requests log like an API request, under the console's "key".
      const logged = (await (await consoleCall(stack, owner, 'GET', `/api/v1/workspaces/${owner.workspaceId}/requests`)).json()) as { requests: Array<{ key: { label: string }; status: number; credits: number | null; operation: string }> };
      expect(logged.requests.map((r) => [r.key.label, r.operation, r.status, r.credits])).toEqual([
        ['console Playground (live)', 'consolePlayground', 200, 0],
        ['console Playground (live)', 'consolePlayground', 200, 3],
        ['console Playground (test)', 'consolePlayground', 200, 0],
      ]);
      // One lens more: only it is new.
      await page.getByRole('checkbox', { name: /^people / }).check();
      await expect.poll(() => preview.textContent(), WAIT).toBe('1 lens new, 3 already in your registry: 1 credit');
      expect(await seriousA11yViolations(page)).toEqual([]);
      // At a 390 px phone nothing scrolls sideways (the code blocks scroll in their own box).
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await page.setViewportSize({ width: 1280, height: 900 });
      await screenshot(page, 'playground');
      await page.getByRole('checkbox', { name: /^people / }).uncheck();

      // The copied curl command, with a real key, against the API listening on a real port.
      await page.getByRole('button', { name: 'Copy curl' }).click();
      await expect.poll(() => page.getByText('Copied the curl request.').count()).toBe(1);
      const curl = await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText());
      expect(curl).toContain('$LENSTACK_API_KEY');
      const keyRes = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/keys`, { kind: 'live', name: 'playground curl' });
      const { key } = (await keyRes.json()) as { key: string };
      const api = stack.pipeline.app;
      if (!api.server.listening) await api.listen({ host: '127.0.0.1', port: 0 });
      const port = (api.server.address() as AddressInfo).port;
      const out = await run('bash', ['-c', curl], { cwd: dir, env: { ...process.env, LENSTACK_API_KEY: key, LENSTACK_BASE_URL: `http://127.0.0.1:${port}` }, maxBuffer: 16 * 1024 * 1024 });
      const answer = JSON.parse(out.stdout) as { object: string; usage: { modulesUsed: string[]; creditsCharged: number } };
      expect(answer.object).toBe('analysis');
      expect([...answer.usage.modulesUsed].sort()).toEqual(['dating', 'describe', 'location', 'moderation']);
      expect(answer.usage.creditsCharged).toBe(0);
      expect(await balance(owner)).toBe(before.balance - 3);
    } finally {
      await ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it('the preview and the run are the workspace members\' only: another person gets 404 and nothing is charged', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const other = await signUpOverHttp(stack, newEmail());
    const sha256 = 'a'.repeat(64);
    const mine = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/playground/preview`, { sha256, preset: 'full-analysis' });
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { credits: number }).credits).toBeGreaterThan(0);
    expect((await consoleCall(stack, other, 'POST', `/api/v1/workspaces/${owner.workspaceId}/playground/preview`, { sha256, modules: ['dating'] })).status).toBe(404);
    expect((await consoleCall(stack, other, 'POST', `/api/v1/workspaces/${owner.workspaceId}/playground/analyze`, { mode: 'live', imageBase64: 'AAAA', modules: ['dating'] })).status).toBe(404);
    expect(await ledger(owner)).toEqual({ charged: 0, reserves: 0 });
  }, 120_000);
});
