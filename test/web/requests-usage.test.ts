import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseCsv } from 'csv-parse/sync';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { bearer } from '../helpers/app.ts';
import { RecordingPaymentGateway } from '../../payments/recording-gateway.ts';
import { screenshot, seriousA11yViolations } from './browser.ts';
import { consoleSuite, type ConsoleStack } from './console-stack.ts';
import { browserCookies, consoleCall, emailMaker, type Person, signUpOverHttp } from './people.ts';

/**
 * The console's Requests and Usage & billing sections (issue 26 §3, §5; docs/decisions.md "The
 * console's Requests log", "Usage & billing"): through the real API (its request-log hook and
 * buffer, Postgres), a worker, Temporal and the console's server, read in Debian's Chromium.
 */
let stack: ConsoleStack;
let browser: Browser;
consoleSuite((s, b) => {
  [stack, browser] = [s, b];
});

const newEmail = emailMaker('usage');
/** How long a poll waits for the page to catch up (a wait on a loaded machine, not a bound on speed). */
const WAIT = { timeout: 30_000 };
const api = () => stack.pipeline.app;
async function json<T>(res: Response): Promise<T> {
  return (await res.json()) as T;
}
async function noiseJpeg(): Promise<Buffer> {
  return sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
}
async function liveKey(person: Person): Promise<{ key: string; id: string }> {
  const res = await consoleCall(stack, person, 'POST', `/api/v1/workspaces/${person.workspaceId}/keys`, { kind: 'live', name: 'ci server' });
  expect(res.status).toBe(201);
  return json<{ key: string; id: string }>(res);
}
async function openConsole(person: Person, path: string): Promise<{ page: Page; close: () => Promise<void> }> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
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

interface RequestRow {
  id: string;
  status: number;
  errorCode: string | null;
  credits: number | null;
  requestId: string;
  operation: string;
  key: { id: string; label: string };
  latencyMs: number;
}

describe('Requests', () => {
  it('a 422 bad image sent with the workspace key is listed with its code and opens on its error envelope; filters and keyset pages work; another workspace sees none of it', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const { key, id: keyId } = await liveKey(owner);
    const bad = await api().inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: Buffer.from('this is not a photo at all').toString('base64'), modules: ['dating'] } });
    expect(bad.statusCode).toBe(422);
    const badBody = bad.json() as { error: { code: string; requestId: string } };
    expect(badBody.error.code).toBe('IMAGE_INVALID');
    const good = await api().inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: (await noiseJpeg()).toString('base64'), modules: ['dating'] } });
    expect(good.statusCode).toBe(200);
    const analysis = good.json() as { id: string; usage: { creditsCharged: number }; meta: { requestId: string } };
    for (let i = 0; i < 3; i++) expect((await api().inject({ method: 'GET', url: '/v1/modules', headers: bearer(key) })).statusCode).toBe(200);
    // Requests with no workspace key are not the workspace's: an unknown key is not recorded anywhere.
    expect((await api().inject({ method: 'GET', url: '/v1/modules', headers: bearer('svc_live_' + 'x'.repeat(40)) })).statusCode).toBe(401);
    await api().requestLog.flush();

    // Over HTTP: newest first, every field, a page at a time (keyset), without gaps or repeats.
    const base = `/api/v1/workspaces/${owner.workspaceId}/requests`;
    const all = await json<{ requests: RequestRow[]; next: string | null; operations: string[] }>(await consoleCall(stack, owner, 'GET', base));
    expect(all.requests.map((r) => r.operation)).toEqual(['getCatalog', 'getCatalog', 'getCatalog', 'analyzeV1', 'analyzeV1']);
    expect(all.operations).toEqual(['analyzeV1', 'getCatalog']);
    const failed = all.requests[4]!;
    expect(failed).toMatchObject({ status: 422, errorCode: 'IMAGE_INVALID', credits: 0, requestId: badBody.error.requestId, key: { id: keyId, label: `svc_live_…${key.slice(-4)}` } });
    expect(all.requests[3]).toMatchObject({ status: 200, errorCode: null, credits: analysis.usage.creditsCharged, requestId: analysis.meta.requestId });
    expect(all.requests.every((r) => Number.isInteger(r.latencyMs) && r.latencyMs >= 0)).toBe(true);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { requests: RequestRow[]; next: string | null } = await json(await consoleCall(stack, owner, 'GET', `${base}?limit=2${cursor ? `&cursor=${cursor}` : ''}`));
      expect(page.requests.length).toBeLessThanOrEqual(2);
      seen.push(...page.requests.map((r) => r.id));
      cursor = page.next;
    } while (cursor);
    expect(seen).toEqual(all.requests.map((r) => r.id));
    const onlyErrors = await json<{ requests: RequestRow[] }>(await consoleCall(stack, owner, 'GET', `${base}?status=error`));
    expect(onlyErrors.requests.map((r) => r.id)).toEqual([failed.id]);
    expect((await json<{ requests: RequestRow[] }>(await consoleCall(stack, owner, 'GET', `${base}?operation=analyzeV1&status=200`))).requests.map((r) => r.id)).toEqual([all.requests[3]!.id]);
    expect((await json<{ requests: RequestRow[] }>(await consoleCall(stack, owner, 'GET', `${base}?to=${new Date(Date.now() - 3_600_000).toISOString()}`))).requests).toEqual([]);
    // The stored row holds the envelope, never a key, a body or image bytes.
    const stored = await stack.pipeline.db.query<{ row: string }>('SELECT row_to_json(r)::text AS row FROM api_requests r WHERE user_id = $1', [owner.workspaceId]);
    expect(stored.rows).toHaveLength(5);
    for (const { row } of stored.rows) {
      expect(row).not.toContain(key);
      expect(row).not.toContain(Buffer.from('this is not a photo at all').toString('base64'));
      expect(row).not.toContain('imageBase64');
    }

    // Another workspace: 404 on this one's list and rows, and an empty list of its own.
    const other = await signUpOverHttp(stack, newEmail());
    expect((await consoleCall(stack, other, 'GET', base)).status).toBe(404);
    expect((await consoleCall(stack, other, 'GET', `${base}/${failed.id}`)).status).toBe(404);
    expect((await consoleCall(stack, other, 'GET', `/api/v1/workspaces/${other.workspaceId}/requests/${failed.id}`)).status).toBe(404);
    expect((await json<{ requests: RequestRow[] }>(await consoleCall(stack, other, 'GET', `/api/v1/workspaces/${other.workspaceId}/requests`))).requests).toEqual([]);

    // In Chromium: reached from the section navigation by keyboard, the row with its code, its envelope.
    const { page, close } = await openConsole(owner, '/');
    try {
      const nav = page.getByRole('navigation', { name: 'Sections' });
      await nav.getByRole('link', { name: 'Requests' }).focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${stack.url}/requests`);
      expect(await nav.getByRole('link', { name: 'Requests' }).getAttribute('aria-current')).toBe('page');
      const rows = page.getByTestId('requests').getByRole('row');
      await expect.poll(() => rows.count(), WAIT).toBe(5);
      const failedRow = rows.filter({ hasText: badBody.error.requestId });
      expect(await failedRow.textContent()).toContain('IMAGE_INVALID');
      expect(await failedRow.textContent()).toContain('422');
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(await fitsAPhone(page)).toBe(true);
      await screenshot(page, 'requests');

      await page.getByLabel('Status').selectOption('error');
      await page.getByRole('button', { name: 'Apply' }).click();
      // The filter is in the address: a filtered view can be linked, and survives a reload.
      await page.waitForURL(`${stack.url}/requests?status=error`);
      await expect.poll(() => rows.count(), WAIT).toBe(1);
      expect(await rows.first().textContent()).toContain('IMAGE_INVALID');
      await page.reload();
      await expect.poll(() => rows.count(), WAIT).toBe(1);
      expect(await page.getByLabel('Status').inputValue()).toBe('error');
      expect(await rows.first().textContent()).toContain('IMAGE_INVALID');

      await page.getByRole('link', { name: `Open request ${badBody.error.requestId}` }).click();
      await page.waitForURL(`${stack.url}/requests/${failed.id}`);
      await expect.poll(() => page.getByTestId('request-code').textContent(), WAIT).toBe('IMAGE_INVALID');
      const envelope = JSON.parse((await page.getByTestId('request-error').textContent())!) as { error: { code: string; requestId: string; message: string } };
      expect(envelope).toEqual(badBody);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'request-error');

      // The successful analysis opens on the analysis it answered with.
      const ok = all.requests[3]!;
      await page.goto(`${stack.url}/requests/${ok.id}`);
      await expect.poll(() => page.getByTestId('request-status').textContent(), WAIT).toBe('200');
      expect((JSON.parse((await page.getByTestId('request-analysis').textContent())!) as { id: string }).id).toBe(analysis.id);
    } finally {
      await close();
    }
  }, 180_000);
});

describe('Usage & billing', () => {
  it('an analysis is one row with the credits it was charged (no separate hold), the chart splits it by lens, the CSV reads back with formula-looking cells neutralised', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const { key } = await liveKey(owner);
    // A caller's x-request-id becomes the row's reference: one that a spreadsheet would run.
    const requestId = '-cmd.calc.A1';
    const res = await api().inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(key), 'x-request-id': requestId }, payload: { imageBase64: (await noiseJpeg()).toString('base64'), modules: ['dating', 'location'] } });
    expect(res.statusCode).toBe(200);
    const charged = (res.json() as { usage: { creditsCharged: number } }).usage.creditsCharged;
    expect(charged).toBe(2);
    // The ledger has the hold and its settlement: two rows that the usage shows as one.
    const ledger = await stack.pipeline.db.query<{ kind: string }>('SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id', [owner.workspaceId]);
    expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'settle']);

    const usage = await json<{ rows: Array<{ kind: string; charged: number; added: number; reference: string | null }>; perDay: Array<{ day: string; total: number; lenses: Record<string, number> }> }>(
      await consoleCall(stack, owner, 'GET', `/api/v1/workspaces/${owner.workspaceId}/usage`),
    );
    expect(usage.rows).toEqual([
      expect.objectContaining({ kind: 'analysis', charged: 2, added: 0, reference: requestId }),
      expect.objectContaining({ kind: 'grant', charged: 0, added: 1000 }),
    ]);
    const today = usage.perDay.at(-1)!;
    expect(today).toEqual({ day: new Date().toISOString().slice(0, 10), total: 2, lenses: { dating: 1, location: 1 } });
    // Another workspace's member: 404 on this one's rows and its CSV, nothing of it in their own.
    const other = await signUpOverHttp(stack, newEmail());
    expect((await consoleCall(stack, other, 'GET', `/api/v1/workspaces/${owner.workspaceId}/usage`)).status).toBe(404);
    expect((await consoleCall(stack, other, 'GET', `/api/v1/workspaces/${owner.workspaceId}/usage.csv`)).status).toBe(404);
    const theirs = await json<{ rows: Array<{ kind: string }> }>(await consoleCall(stack, other, 'GET', `/api/v1/workspaces/${other.workspaceId}/usage`));
    expect(theirs.rows.map((r) => r.kind)).toEqual(['grant']);

    const { page, close } = await openConsole(owner, '/');
    try {
      await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Usage & billing' }).click();
      await page.waitForURL(`${stack.url}/usage`);
      const rows = page.getByTestId('usage-rows').getByRole('row');
      await expect.poll(() => rows.count(), WAIT).toBe(2);
      const cells = await rows.first().getByRole('cell').allTextContents();
      expect(cells.slice(1)).toEqual(['Analysis', requestId, '2', '']);
      // Chartist draws each bar part as an SVG <line>, marked with its lens (one day, so one per lens).
      await expect.poll(() => page.getByTestId('lens-chart').locator('line[data-lens="dating"]').count(), WAIT).toBe(1);
      await expect.poll(() => page.getByTestId('lens-chart').locator('line[data-lens="location"]').count(), WAIT).toBe(1);
      // Packs and the card offer, as on the overview.
      await expect.poll(() => page.getByRole('button', { name: 'Buy the Starter pack' }).isVisible(), WAIT).toBe(true);
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(await fitsAPhone(page)).toBe(true);
      await screenshot(page, 'usage');

      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download CSV' }).click()]);
      expect(file.suggestedFilename()).toMatch(/^lenstack-usage-\d{4}-\d{2}-\d{2}\.csv$/);
      const records = parseCsv(readFileSync((await file.path())!), { bom: true }) as string[][];
      expect(records[0]).toEqual(['Time (UTC)', 'What', 'Reference', 'Items', 'Credits charged', 'Credits added', 'Note']);
      expect(records.slice(1).map((r) => r.slice(1))).toEqual([
        ['Analysis', `'${requestId}`, '1', '2', '0', ''],
        ['Free credits', '', '1', '0', '1000', ''],
      ]);
    } finally {
      await close();
    }
  }, 180_000);

  it('a failed analysis is one row charged 0, a batch one row with what its photos were charged, a purchase one row with its first-pack bonus; older rows come by keyset pages', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const { key } = await liveKey(owner);
    // Every vendor refuses: the analysis's hold is released, nothing charged.
    stack.pipeline.sim.setBehaviour('all', { failRate: 1, failure: 'http400' });
    let failed;
    try {
      failed = await api().inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: (await noiseJpeg()).toString('base64'), modules: ['dating'] } });
    } finally {
      stack.pipeline.sim.setBehaviour('all', { failRate: 0 });
    }
    expect(failed.statusCode).toBe(502);
    const failedRequestId = (failed.json() as { error: { requestId: string } }).error.requestId;
    const submitted = await api().inject({
      method: 'POST',
      url: '/v1/batches',
      headers: bearer(key),
      payload: { modules: ['dating'], items: await Promise.all([1, 2, 3].map(async (i) => ({ base64: (await noiseJpeg()).toString('base64'), name: `p${i}.jpg` }))) },
    });
    expect(submitted.statusCode).toBe(202);
    const batchId = (submitted.json() as { id: string }).id;
    const status = async () => (await api().inject({ method: 'GET', url: `/v1/batches/${batchId}`, headers: bearer(key) })).json() as { status: string; creditsCharged: number };
    await expect.poll(async () => (await status()).status, { timeout: 60_000 }).toBe('completed');
    const batchCharged = (await status()).creditsCharged;
    expect(batchCharged).toBe(3);

    const development = await stack.variant({ stripe: null, payments: new RecordingPaymentGateway(stack.pipeline.db) });
    const bought = await development.inject({
      method: 'POST',
      url: `/api/v1/workspaces/${owner.workspaceId}/purchases`,
      headers: { cookie: owner.cookie, origin: stack.url, 'content-type': 'application/json' },
      payload: { pack: 'starter', idempotencyKey: 'usage-click-1' },
    });
    expect(bought.statusCode).toBe(201);
    const purchaseId = (bought.json() as { purchase: { purchaseId: string } }).purchase.purchaseId;

    type Row = { id: string; kind: string; charged: number; added: number; reference: string | null; items: number; released: boolean };
    const base = `/api/v1/workspaces/${owner.workspaceId}/usage`;
    const first = await json<{ rows: Row[] }>(await consoleCall(stack, owner, 'GET', base));
    expect(first.rows.map(({ kind, charged, added, reference, items }) => ({ kind, charged, added, reference, items }))).toEqual([
      { kind: 'purchase', charged: 0, added: 2000, reference: purchaseId, items: 1 },
      { kind: 'batch', charged: batchCharged, added: 0, reference: batchId, items: 3 },
      { kind: 'analysis', charged: 0, added: 0, reference: failedRequestId, items: 1 },
      { kind: 'grant', charged: 0, added: 1000, reference: null, items: 1 },
    ]);
    expect(first.rows.map((r) => r.released)).toEqual([false, false, true, false]);
    // A page of one at a time gives the same rows, each once.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { rows: Row[]; next: string | null } = await json(await consoleCall(stack, owner, 'GET', `${base}?limit=1${cursor ? `&cursor=${cursor}` : ''}`));
      seen.push(...page.rows.map((r) => r.id));
      cursor = page.next;
    } while (cursor);
    expect(seen).toEqual(first.rows.map((r) => r.id));
  }, 180_000);
});
