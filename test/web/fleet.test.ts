import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import type { Browser, BrowserContext } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { distinctPhotos } from '../../bench/distinct-photos.ts';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { expectEnvelope } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { launchChromium, screenshot, seriousA11yViolations } from './browser.ts';
import { startConsoleStack, type ConsoleStack } from './console-stack.ts';
import { consoleCall, signUpOverHttp, type Person } from './people.ts';

/**
 * The console takes a fleet and shows the results (issue 22 §3), in Debian's Chromium against the
 * real stack (API, worker, simulated vendors, Postgres, Temporal): a folder of vehicle folders and
 * a spreadsheet → the review (refused vehicles with their reasons, before anything is uploaded or
 * charged) → upload progress → the batch's page with each vehicle's report and the thumbnails of
 * the photos its damage was seen on → the export with the columns chosen. Then, over HTTP, what an
 * attacker would try on thumbnails and submissions, and an upload continued on a second console.
 */
let stack: ConsoleStack;
let browser: Browser;
beforeAll(async () => {
  stack = await startConsoleStack();
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});
beforeEach(() => stack.resetSignInThrottle());

let counter = 0;
const newEmail = () => `fleet${process.pid}-${Date.now()}-${counter++}@example.test`;

/** A browser context signed in as the person (their session cookie, as the browser would hold it). */
async function signedInContext(person: Person): Promise<BrowserContext> {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
  await context.addCookies(
    person.cookie.split('; ').map((kv) => {
      const at = kv.indexOf('=');
      return { name: kv.slice(0, at), value: kv.slice(at + 1), url: stack.url, httpOnly: true, sameSite: 'Lax' as const };
    }),
  );
  return context;
}

const VIN_1 = 'WVWZZZ1JZ3W386752';

describe('a fleet from the console', () => {
  it('folder of folders and a spreadsheet → review with refusals → upload progress → each vehicle’s report with damage thumbnails → export with the chosen columns', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const ws = person.workspaceId;
    // The fleet: two vehicles that run, one with 51 photos, one whose spreadsheet VIN is not a VIN,
    // a spreadsheet row whose folder has no photos, and a stray non-photo file.
    const root = path.join(mkdtempSync(path.join(tmpdir(), 'lenstack-fleet-')), 'fleet');
    // Many photos per vehicle: the simulated vendor names damage at photo positions 0 to 100, and
    // positions past a vehicle's photos are dropped (lenses/vehicle-report-photos.ts).
    const photos = (await distinctPhotos(9000, 142)).map((b64) => Buffer.from(b64, 'base64'));
    const put = (folder: string, name: string, bytes: Buffer | string) => {
      mkdirSync(path.join(root, folder), { recursive: true });
      writeFileSync(path.join(root, folder, name), bytes);
    };
    const van1 = Array.from({ length: 45 }, (_, k) => ({ name: `${String(k).padStart(2, '0')}.jpg`, bytes: photos[k]! }));
    for (const f of van1) put('van-1', f.name, f.bytes);
    for (let k = 0; k < 45; k++) put('van-2', `${String(k).padStart(2, '0')}.jpg`, photos[45 + k]!);
    put('van-2', 'notes.txt', 'not a photo');
    put('truck-9', 'front.jpg', photos[90]!);
    for (let k = 0; k < 51; k++) put('bus-51', `p${String(k).padStart(2, '0')}.jpg`, photos[91 + k]!);
    put('empty', 'readme.txt', 'no photos here');
    writeFileSync(
      path.join(root, 'fleet.csv'),
      ['folder,VIN,mileage,make,model,year', `van-1,${VIN_1},84000,Volkswagen,Golf,2003`, 'van-2,,12 500,Ford,Transit,2019', 'truck-9,WVWZZZ1JZ3W38675I,1000,MAN,TGX,2020', 'empty,,,,,'].join('\r\n'),
    );

    const context = await signedInContext(person);
    const page = await context.newPage();
    await page.goto(`${stack.url}/`);
    await page.getByRole('button', { name: 'New batch' }).click();
    await page.getByLabel('Vehicles (a folder per vehicle)').check();
    await page.getByLabel('Choose the fleet folder').setInputFiles(root);

    // The review, before anything is uploaded or charged.
    const review = page.getByTestId('fleet-review');
    await expect.poll(() => review.locator('tbody tr').count()).toBe(5);
    const rowOf = async (name: string) => (await review.locator('tbody tr', { has: page.getByRole('rowheader', { name, exact: true }) }).innerText()).replace(/\s+/g, ' ');
    expect(await rowOf('van-1')).toBe(`van-1 ${VIN_1} 84,000 45 will be analyzed`);
    expect(await rowOf('van-2')).toBe('van-2 — 12,500 45 will be analyzed');
    expect(await rowOf('bus-51')).toBe('bus-51 — — 51 Refused: 51 photos; a vehicle takes at most 50');
    expect(await rowOf('truck-9')).toMatch(/^truck-9 WVWZZZ1JZ3W38675I 1,000 1 Refused: VIN "WVWZZZ1JZ3W38675I" is not 17 letters and digits \(no I, O or Q\)$/);
    expect(await rowOf('empty')).toBe('empty — — 0 Refused: no photos in its folder');
    expect(await page.getByRole('heading', { name: /^Review: 2 vehicle\(s\) will be analyzed \(2 credits\), 3 refused$/ }).count()).toBe(1);
    expect((await stack.pipeline.db.query('SELECT 1 FROM uploads WHERE user_id = $1', [ws])).rowCount).toBe(0);
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ community: 1000, reserved: 0 });
    expect(await seriousA11yViolations(page)).toEqual([]);

    // The export's columns: one left out.
    await page.getByText(/^Export columns: all$/).click();
    await page.getByLabel('Accident likelihood').uncheck();
    await screenshot(page, 'fleet-review');

    await page.getByRole('button', { name: 'Upload 90 photos and analyze 2 vehicle(s)' }).click();
    const started = page.getByRole('status').filter({ hasText: /^Batch bat_/ });
    await expect.poll(() => started.count(), { timeout: 60_000 }).toBe(1);
    expect(await started.textContent()).toMatch(/^Batch bat_\S+ started with 2 vehicles\.$/);
    const id = /Batch (bat_\S+) started/.exec((await started.textContent())!)![1]!;
    // The upload's progress stays shown: every photo and byte of the two vehicles.
    const bytes = photos.slice(0, 90).reduce((n, b) => n + b.length, 0);
    expect(await page.getByTestId('fleet-progress').locator('p').first().textContent()).toBe(`90 of 90 photos uploaded · ${(bytes / 1024 ** 2).toFixed(1)} of ${(bytes / 1024 ** 2).toFixed(1)} MB`);
    // The uploads went into the batch: none left counting against a quota.
    expect((await stack.pipeline.db.query('SELECT 1 FROM uploads WHERE user_id = $1', [ws])).rowCount).toBe(0);

    // The batch's own page follows it to the end.
    await page.getByRole('link', { name: 'Open the batch’s page' }).click();
    await page.waitForURL(`${stack.url}/batches/${id}`);
    await expect.poll(() => page.getByTestId('batch-status').textContent(), { timeout: 120_000, interval: 250 }).toMatch(/^completed · 2 done, 0 failed, 0 pending of 2 vehicles · 2 credits/);

    // Each vehicle's report as a person reads it, the damage with the photos it was seen on.
    const detail = (await (await consoleCall(stack, person, 'GET', `/api/v1/batch/${id}`)).json()) as {
      items: Array<{ source: string; photos: Array<{ source: string; sha256: string }>; report: { overallCondition: { grade: string }; observations: Array<{ photoIndexes: number[] }>; vehicleContext: { vin: string | null } } }>;
    };
    expect(detail.items.map((i) => i.source)).toEqual(['van-1', 'van-2']);
    // The vehicle's photos in the folder's order, each the bytes of its file.
    expect(detail.items[0]!.photos.map((p) => [p.source, p.sha256])).toEqual(van1.map((f) => [`fleet/van-1/${f.name}`, createHash('sha256').update(f.bytes).digest('hex')]));
    expect(detail.items[0]!.report.vehicleContext.vin).toBe(VIN_1);
    let thumbnails = 0;
    for (const [k, item] of detail.items.entries()) {
      const card = page.getByTestId(`vehicle-${k}`);
      expect(await card.getByRole('heading', { level: 2 }).textContent()).toBe(item.source);
      expect(await card.getByTestId('overall').textContent()).toContain(`Overall condition: ${item.report.overallCondition.grade}`);
      const shown = item.report.observations.flatMap((o) => o.photoIndexes.filter((i) => i < item.photos.length));
      thumbnails += shown.length;
      const images = card.getByTestId('damage').locator('img');
      expect(await images.count()).toBe(shown.length);
      // Every thumbnail arrived and decoded: WebP from the console, at most 256 px.
      await expect.poll(() => images.evaluateAll((els) => els.every((e) => (e as unknown as { complete: boolean; naturalWidth: number }).complete && (e as unknown as { naturalWidth: number }).naturalWidth > 0))).toBe(true);
      const alts = await images.evaluateAll((els) => els.map((e) => (e as unknown as { alt: string }).alt));
      expect(alts.every((a, j) => a.endsWith(`photo ${shown[j]! + 1}, ${item.photos[shown[j]!]!.source}`))).toBe(true);
    }
    expect(thumbnails).toBeGreaterThan(0);
    expect(await seriousA11yViolations(page)).toEqual([]);
    // Phone: nothing scrolls sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.setViewportSize({ width: 1280, height: 900 });
    await screenshot(page, 'fleet-batch');

    // The export: the columns chosen at submit time, one row per vehicle.
    const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'csv' }).click()]);
    const records = parseCsv(readFileSync((await file.path())!), { bom: true }) as string[][];
    expect(records[0]).toEqual(['#', 'Source', 'Status', 'SHA-256', 'Error', 'Make', 'Model', 'VIN', 'Mileage', 'Condition grade', 'Condition score', 'Missing views']);
    expect(records.slice(1).map((r) => [r[1], r[2], r[8]])).toEqual([
      ['van-1', 'done', '84000'],
      ['van-2', 'done', '12500'],
    ]);
    expect(records[1]![7]).toBe(VIN_1);
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ community: 998, reserved: 0 });
    expect(await checkInvariants(stack.pipeline.db, ws)).toEqual([{ userId: ws, ok: true, problems: [] }]);
    await context.close();
  }, 300_000);
});
