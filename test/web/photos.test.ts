import { createHash, randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { checkInvariants } from '../../credits/ledger.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { bearer } from '../helpers/app.ts';
import { screenshot, seriousA11yViolations } from './browser.ts';
import { consoleSuite, type ConsoleStack } from './console-stack.ts';
import { browserCookies, consoleCall, emailMaker, joinWorkspace, type Person, signUpOverHttp } from './people.ts';

/**
 * The console's Photos section (issue 26 §4; docs/decisions.md "The console's Photos"): photos
 * analyzed through the real API (worker, Temporal, Postgres, blob store) listed as thumbnails with
 * their lenses and billing, found by a dropped photo, erased as DELETE /v1/photos erases, read in
 * Debian's Chromium; and the workspace's alone.
 */
let stack: ConsoleStack;
let browser: Browser;
consoleSuite((s, b) => {
  [stack, browser] = [s, b];
});

const newEmail = emailMaker('photos');
/** How long a poll waits for the page to catch up (a wait on a loaded machine, not a bound on speed). */
const WAIT = { timeout: 30_000 };
const api = () => stack.pipeline.app;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
async function noiseJpeg(): Promise<Buffer> {
  return sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
}
async function liveKey(person: Person): Promise<string> {
  const res = await consoleCall(stack, person, 'POST', `/api/v1/workspaces/${person.workspaceId}/keys`, { kind: 'live', name: 'photos test' });
  expect(res.status).toBe(201);
  return ((await res.json()) as { key: string }).key;
}
async function analyze(key: string, photo: Buffer, modules: string[]): Promise<number> {
  const res = await api().inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: photo.toString('base64'), modules } });
  expect(res.statusCode).toBe(200);
  return (res.json() as { usage: { creditsCharged: number } }).usage.creditsCharged;
}
async function openConsole(person: Person, path: string): Promise<{ page: Page; close: () => Promise<void> }> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await ctx.addCookies(browserCookies(stack, person));
  const page = await ctx.newPage();
  await page.goto(`${stack.url}${path}`);
  return { page, close: () => ctx.close() };
}
/** At a 390 px wide phone viewport nothing makes the page scroll sideways (the records' JSON scrolls in its own box). */
async function fitsAPhone(page: Page): Promise<boolean> {
  const viewport = page.viewportSize()!;
  await page.setViewportSize({ width: 390, height: 844 });
  const width = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
  await page.setViewportSize(viewport);
  return width <= 390;
}
/** Drops the bytes on the page's drop zone as a file, the way a browser's drag and drop delivers it. */
async function dropPhoto(page: Page, testId: string, photo: Buffer): Promise<void> {
  const dataTransfer = await page.evaluateHandle((b64) => {
    const g = globalThis as unknown as { DataTransfer: new () => { items: { add(f: unknown): void } }; File: new (parts: unknown[], name: string, o: { type: string }) => unknown; atob(s: string): string };
    const bytes = Uint8Array.from(g.atob(b64), (c) => c.charCodeAt(0));
    const dt = new g.DataTransfer();
    dt.items.add(new g.File([bytes], 'dropped.jpg', { type: 'image/jpeg' }));
    return dt;
  }, photo.toString('base64'));
  await page.dispatchEvent(`[data-testid="${testId}"]`, 'dragover', { dataTransfer });
  await page.dispatchEvent(`[data-testid="${testId}"]`, 'drop', { dataTransfer });
}

interface Listed {
  sha256: string;
  lenses: Array<{ lens: string; credits: number; billedAt: string }>;
}

describe('Photos', () => {
  it('two analyzed photos show as thumbnails with their lenses and billed credits; a dropped one is found exactly; erasing it removes it from Photos and from the API’s lookup, and the ledger still balances', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const key = await liveKey(owner);
    const [a, b] = [await noiseJpeg(), await noiseJpeg()];
    const chargedA = await analyze(key, a, ['dating']);
    const chargedB = await analyze(key, b, ['dating', 'location']);
    expect(chargedA).toBeGreaterThan(0);

    // The list over HTTP: newest analyzed first, each lens with what its run charged.
    const list = (await (await consoleCall(stack, owner, 'GET', `/api/v1/workspaces/${owner.workspaceId}/photos`)).json()) as { photos: Listed[]; next: string | null };
    expect(list.photos.map((p) => p.sha256)).toEqual([sha(b), sha(a)]);
    // Moderation runs free with every analysis: its record is listed at 0 credits.
    expect(list.photos[1]!.lenses.map((l) => [l.lens, l.credits])).toEqual([['dating', chargedA], ['moderation', 0]]);
    expect(list.photos[0]!.lenses.map((l) => l.lens)).toEqual(['dating', 'location', 'moderation']);
    expect(list.photos[0]!.lenses.reduce((s, l) => s + l.credits, 0)).toBe(chargedB);
    // Keyset pages: one photo a page, the second page holds the older one and ends the list.
    const first = (await (await consoleCall(stack, owner, 'GET', `/api/v1/workspaces/${owner.workspaceId}/photos?limit=1`)).json()) as { photos: Listed[]; next: string };
    expect(first.photos.map((p) => p.sha256)).toEqual([sha(b)]);
    const second = (await (await consoleCall(stack, owner, 'GET', `/api/v1/workspaces/${owner.workspaceId}/photos?limit=1&cursor=${first.next}`)).json()) as { photos: Listed[]; next: string | null };
    expect(second).toMatchObject({ photos: [{ sha256: sha(a) }], next: null });

    const { page, close } = await openConsole(owner, '/photos');
    try {
      await expect.poll(() => page.getByRole('link', { name: 'Photos' }).getAttribute('aria-current'), WAIT).toBe('page');
      const cardA = page.getByTestId(`photo-${sha(a)}`);
      const cardB = page.getByTestId(`photo-${sha(b)}`);
      await cardA.waitFor(WAIT);
      await cardB.waitFor(WAIT);
      // Both thumbnails are real pictures (decoded by the browser), with alt text.
      for (const card of [cardA, cardB]) {
        await expect.poll(() => card.locator('img').evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth), WAIT).toBeGreaterThan(0);
        expect(await card.locator('img').getAttribute('alt')).toMatch(/^Photo [0-9a-f]{12}, analyzed /);
      }
      expect(await cardA.textContent()).toContain(`dating${chargedA} credit`);
      expect(await cardB.textContent()).toContain('location');
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'photos');

      // By keyboard: from the Refresh button, Tab reaches the first card's button; Enter opens its records.
      await page.getByRole('button', { name: 'Refresh' }).focus();
      for (let i = 0; i < 10 && !(await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { textContent: string } } }).document.activeElement.textContent.startsWith('Records of'))); i++) {
        await page.keyboard.press('Tab');
      }
      await page.keyboard.press('Enter');
      const records = page.getByTestId('photo-records');
      await records.getByText('"location"').waitFor(WAIT);
      expect(await records.getByRole('heading').textContent()).toContain(sha(b).slice(0, 12));

      // Drop photo A: found, as the same bytes.
      await dropPhoto(page, 'photo-dropzone', a);
      await expect.poll(() => page.getByTestId('lookup-result').textContent(), WAIT).toContain(`Found: the same photo, ${sha(a).slice(0, 12)}`);
      // Open it from the result, and erase it after confirming.
      await page.getByRole('button', { name: 'Open its records' }).click();
      await expect.poll(() => records.getByRole('heading').textContent(), WAIT).toContain(sha(a).slice(0, 12));
      await records.getByRole('button', { name: 'Delete…' }).click();
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(await fitsAPhone(page)).toBe(true);
      await screenshot(page, 'photos-erase');
      await records.getByRole('button', { name: 'Erase photo' }).click();
      await cardA.waitFor({ state: 'detached', ...WAIT });
      // Focus returns to the list, which says what happened.
      expect(await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { id: string } } }).document.activeElement.id)).toBe('photos-h');
      expect(await page.getByRole('status').filter({ hasText: 'was erased' }).textContent()).toBe(`Photo ${sha(a).slice(0, 12)} was erased with its lens records.`);
      await page.reload();
      await cardB.waitFor(WAIT);
      expect(await cardA.count()).toBe(0);
    } finally {
      await close();
    }
    const lookup = await api().inject({ method: 'GET', url: `/v2/lookup?sha256=${sha(a)}`, headers: bearer(key) });
    expect(lookup.statusCode).toBe(200);
    expect((lookup.json() as { results: Record<string, { matchType: string }> }).results[sha(a)]!.matchType).toBe('none');
    // Dropping it again finds nothing; the other photo is still found.
    const again = (await (await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/photos/lookup`, { imageBase64: a.toString('base64') })).json()) as { matchType: string };
    expect(again.matchType).toBe('none');
    expect(await checkInvariants(stack.pipeline.db, owner.workspaceId)).toEqual([{ userId: owner.workspaceId, ok: true, problems: [] }]);
  });

  it('a photo whose bytes retention removed still lists its records, with a placeholder for its thumbnail', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const key = await liveKey(owner);
    const photo = await noiseJpeg();
    await analyze(key, photo, ['dating']);
    // What the retention collector leaves: the registry row and records, no bytes, no thumbnail.
    await blobStoreFromConfig(stack.pipeline.config).delete(sha(photo));
    await stack.pipeline.db.query('DELETE FROM thumbnails WHERE sha256 = $1', [sha(photo)]);
    const { page, close } = await openConsole(owner, '/photos');
    try {
      const card = page.getByTestId(`photo-${sha(photo)}`);
      await card.getByText('Original no longer kept').waitFor(WAIT);
      expect(await card.locator('img').count()).toBe(0);
      expect(await card.textContent()).toContain('dating');
      expect(await seriousA11yViolations(page)).toEqual([]);
    } finally {
      await close();
    }
  });

  it('is the workspace’s: another workspace’s person gets 404 on list, detail, thumbnail, lookup and delete; a member reads but may not delete', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const key = await liveKey(owner);
    const photo = await noiseJpeg();
    await analyze(key, photo, ['dating']);
    const ws = `/api/v1/workspaces/${owner.workspaceId}`;
    expect((await consoleCall(stack, owner, 'GET', `${ws}/thumbnails/${sha(photo)}`)).headers.get('cache-control')).toBe('private, max-age=86400, immutable');

    const stranger = await signUpOverHttp(stack, newEmail());
    for (const [method, path, body] of [
      ['GET', `${ws}/photos`],
      ['GET', `${ws}/photos/${sha(photo)}`],
      ['GET', `${ws}/thumbnails/${sha(photo)}`],
      ['POST', `${ws}/photos/lookup`, { imageBase64: photo.toString('base64') }],
      ['DELETE', `${ws}/photos/${sha(photo)}`],
    ] as const) {
      const res = await consoleCall(stack, stranger, method, path, body);
      expect([method, path, res.status]).toEqual([method, path, 404]);
    }
    // Their own workspace does not hold it either.
    expect((await consoleCall(stack, stranger, 'GET', `/api/v1/workspaces/${stranger.workspaceId}/photos/${sha(photo)}`)).status).toBe(404);
    expect((await consoleCall(stack, stranger, 'DELETE', `/api/v1/workspaces/${stranger.workspaceId}/photos/${sha(photo)}`)).status).toBe(404);

    const member = await signUpOverHttp(stack, newEmail());
    await joinWorkspace(stack, owner, owner.workspaceId, member, 'member');
    const detail = await consoleCall(stack, member, 'GET', `${ws}/photos/${sha(photo)}`);
    expect(detail.status).toBe(200);
    expect(Object.keys(((await detail.json()) as { lenses: Record<string, unknown> }).lenses)).toEqual(['dating', 'moderation']);
    expect((await consoleCall(stack, member, 'DELETE', `${ws}/photos/${sha(photo)}`)).status).toBe(403);
    // Still there, for the owner too.
    expect((await consoleCall(stack, owner, 'GET', `${ws}/photos/${sha(photo)}`)).status).toBe(200);
  });
});
