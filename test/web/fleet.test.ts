import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import type { Browser, BrowserContext } from 'playwright-core';
import ExcelJS from 'exceljs';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { distinctPhotos } from '../../bench/distinct-photos.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { completeBatch } from '../../batches/repository.ts';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { expectEnvelope } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { screenshot, seriousA11yViolations } from './browser.ts';
import { consoleSuite, type ConsoleStack } from './console-stack.ts';
import { uploadThroughConsole } from './console-http.ts';
import { browserCookies, consoleCall, emailMaker, joinWorkspace, type Person, signUpOverHttp } from './people.ts';

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
consoleSuite((s, b) => void ([stack, browser] = [s, b]));

const newEmail = emailMaker('fleet');

/** A browser context signed in as the person (their session cookie, as the browser would hold it). */
async function signedInContext(person: Person): Promise<BrowserContext> {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
  await context.addCookies(browserCookies(stack, person));
  return context;
}

const VIN_1 = 'WVWZZZ1JZ3W386752';
const VIN_2 = '1HGCM82633A004352';

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
    await page.goto(`${stack.url}/batches`);
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

    // A spreadsheet added afterwards (XLSX, read in the browser) replaces the folder's: van-2 gets its VIN.
    const workbook = new ExcelJS.Workbook();
    const sheet = workbook.addWorksheet('Fleet');
    sheet.addRows([
      ['Folder', 'VIN', 'Mileage', 'Make', 'Model', 'Year'],
      ['van-1', VIN_1, 84000, 'Volkswagen', 'Golf', 2003],
      ['VAN-2', VIN_2, 13000, 'Ford', 'Transit', 2019],
      ['truck-9', 'WVWZZZ1JZ3W38675I', 1000, 'MAN', 'TGX', 2020],
      ['empty'],
    ]);
    const xlsx = path.join(path.dirname(root), 'fleet.xlsx');
    writeFileSync(xlsx, Buffer.from(await workbook.xlsx.writeBuffer()));
    await page.getByLabel('Add a spreadsheet').setInputFiles(xlsx);
    await expect.poll(() => page.getByTestId('sheet').textContent()).toBe('Spreadsheet fleet.xlsx: 4 row(s).');
    expect(await rowOf('van-2')).toBe(`van-2 ${VIN_2} 13,000 45 will be analyzed`);
    expect(await rowOf('van-1')).toBe(`van-1 ${VIN_1} 84,000 45 will be analyzed`);
    expect(await rowOf('truck-9')).toMatch(/Refused: VIN "WVWZZZ1JZ3W38675I"/);
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
    await screenshot(page, 'fleet-uploaded');

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
    expect(records[0]).toEqual(['#', 'Source', 'Status', 'SHA-256', 'Error', 'Make', 'Model', 'Year', 'VIN', 'Mileage', 'Condition grade', 'Condition score', 'Missing views']);
    expect(records.slice(1).map((r) => [r[1], r[2], r[7], r[8], r[9]])).toEqual([
      ['van-1', 'done', '2003', VIN_1, '84000'],
      ['van-2', 'done', '2019', VIN_2, '13000'],
    ]);
    expect(await getBalance(stack.pipeline.db, ws)).toMatchObject({ community: 998, reserved: 0 });
    expect(await checkInvariants(stack.pipeline.db, ws)).toEqual([{ userId: ws, ok: true, problems: [] }]);
    await context.close();
  }, 300_000);
});

/** One file uploaded by tus through a console server (`base`, this stack or its replica). Its upload id. */
const uploadVia = (base: string, person: Person, workspaceId: string, bytes: Buffer, name?: string) =>
  uploadThroughConsole(base, person, workspaceId, bytes, { origin: stack.url, ...(name ? { name } : {}) });

const completedBatch = async (person: Person, id: string) =>
  expect.poll(async () => ((await (await consoleCall(stack, person, 'GET', `/api/v1/batch/${id}`)).json()) as { batch: { status: string } }).batch.status, { timeout: 120_000, interval: 250 }).toBe('completed');

describe('thumbnails and batch pages are the workspace’s', () => {
  it('the workspace’s own people get an upright 256 px WebP made once, cached privately; another workspace, no session or a photo not held get 404 / 401 and nothing is made', async () => {
    const owner = await signUpOverHttp(stack, newEmail());
    const other = await signUpOverHttp(stack, newEmail());
    // 2048 × 1536 stored, EXIF orientation 6: upright it is 1536 × 2048.
    const bytes = photoBytes('hdr-canon_hdr_NO.jpg');
    const sha = createHash('sha256').update(bytes).digest('hex');
    const id = await uploadVia(stack.url, owner, owner.workspaceId, bytes, 'canon.jpg');
    const started = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${owner.workspaceId}/batches`, { preset: 'quick-scan', uploads: [{ id, name: 'canon.jpg' }] });
    expect(started.status, await started.clone().text()).toBe(202);
    const batchId = ((await started.json()) as { id: string }).id;
    await completedBatch(owner, batchId);
    const page = (await (await consoleCall(stack, owner, 'GET', `/api/v1/batch/${batchId}`)).json()) as {
      workspaceId: string; batch: { lenses: string[]; kind: string }; items: Array<{ sha256: string; status: string; lenses: Record<string, unknown>; report: unknown }>;
    };
    expect(page.workspaceId).toBe(owner.workspaceId);
    expect(page.batch.kind).toBe('photos');
    expect(page.items).toHaveLength(1);
    expect(page.items[0]).toMatchObject({ sha256: sha, status: 'done', report: null });
    // Each lens's own answer, by lens: what the photo grid shows.
    expect(Object.keys(page.items[0]!.lenses).sort()).toEqual([...page.batch.lenses].sort());

    const thumbPath = (ws: string, s = sha) => `/api/v1/workspaces/${ws}/thumbnails/${s}`;
    const rows = async () => (await stack.pipeline.db.query('SELECT 1 FROM thumbnails WHERE sha256 = $1', [sha])).rowCount;
    // Attacks first: nothing is made for them.
    for (const [who, path] of [[other, thumbPath(owner.workspaceId)], [other, thumbPath(other.workspaceId)], [owner, thumbPath(owner.workspaceId, 'f'.repeat(64))], [owner, thumbPath(owner.workspaceId, '../../etc/passwd')]] as const) {
      const r = await consoleCall(stack, who, 'GET', path);
      expect(r.status, path).toBe(404);
      expect(expectEnvelope(await r.json()).code).toBe('NOT_FOUND');
    }
    expect((await fetch(`${stack.url}${thumbPath(owner.workspaceId)}`)).status).toBe(401);
    expect(await rows()).toBe(0);
    // The other workspace cannot read the batch or retry its items either.
    expect((await consoleCall(stack, other, 'GET', `/api/v1/batch/${batchId}`)).status).toBe(404);
    expect((await consoleCall(stack, other, 'POST', `/api/v1/batch/${batchId}/items/0/retry`, {})).status).toBe(404);
    // A done photo is not retried (and the owner is told why).
    const notFailed = await consoleCall(stack, owner, 'POST', `/api/v1/batch/${batchId}/items/0/retry`, {});
    expect(notFailed.status).toBe(409);
    expect(expectEnvelope(await notFailed.json()).code).toBe('ITEM_NOT_RETRYABLE');

    const first = await consoleCall(stack, owner, 'GET', thumbPath(owner.workspaceId));
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('image/webp');
    expect(first.headers.get('cache-control')).toBe('private, max-age=86400, immutable');
    const webp = Buffer.from(await first.arrayBuffer());
    const meta = await sharp(webp).metadata();
    expect(meta.format).toBe('webp');
    // Upright, inside 256 px, its shape kept.
    expect([meta.width, meta.height]).toEqual([192, 256]);
    expect(await rows()).toBe(1);
    const again = Buffer.from(await (await consoleCall(stack, owner, 'GET', thumbPath(owner.workspaceId))).arrayBuffer());
    expect(again.equals(webp)).toBe(true);
    expect(await rows()).toBe(1);

    // A member of the workspace sees the page and the same thumbnail, but is offered no retry and may not start one.
    const member = await signUpOverHttp(stack, newEmail());
    await joinWorkspace(stack, owner, owner.workspaceId, member, 'member');
    const seen = (await (await consoleCall(stack, member, 'GET', `/api/v1/batch/${batchId}`)).json()) as { mayRetry: boolean; items: unknown[] };
    expect(seen).toMatchObject({ mayRetry: false, items: [expect.objectContaining({ sha256: sha })] });
    expect(Buffer.from(await (await consoleCall(stack, member, 'GET', thumbPath(owner.workspaceId))).arrayBuffer()).equals(webp)).toBe(true);
    const memberRetry = await consoleCall(stack, member, 'POST', `/api/v1/batch/${batchId}/items/0/retry`, {});
    expect(memberRetry.status).toBe(403);
    expect(expectEnvelope(await memberRetry.json()).code).toBe('FORBIDDEN');
    expect(((await (await consoleCall(stack, owner, 'GET', `/api/v1/batch/${batchId}`)).json()) as { mayRetry: boolean }).mayRetry).toBe(true);
  }, 180_000);
});

describe('a batch page opened as the batch closes', () => {
  it('keeps following a batch whose last item finished before the batch was marked completed, and shows it completed', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const id = await uploadVia(stack.url, person, person.workspaceId, photoBytes('Canon_40D.jpg'), 'canon.jpg');
    const started = await consoleCall(stack, person, 'POST', `/api/v1/workspaces/${person.workspaceId}/batches`, { preset: 'quick-scan', uploads: [{ id, name: 'canon.jpg' }] });
    expect(started.status, await started.clone().text()).toBe(202);
    const batchId = ((await started.json()) as { id: string }).id;
    await completedBatch(person, batchId);
    // The moment between the batch's last item finishing and the workflow's step that closes the
    // batch (workflows/batch.ts: finishBatchItem, then claimBatchItems finds none, then completeBatch).
    await stack.pipeline.db.query(`UPDATE batches SET status = 'running', completed_at = NULL WHERE id = $1`, [batchId]);
    const context = await signedInContext(person);
    const page = await context.newPage();
    await page.goto(`${stack.url}/batches/${batchId}`);
    const status = page.getByTestId('batch-status');
    await expect.poll(() => status.textContent()).toMatch(/^running · 1 done, 0 failed, 0 pending of 1 photos/);
    expect(await completeBatch(stack.pipeline.db, batchId)).toBe(true);
    await expect.poll(() => status.textContent(), { timeout: 15_000 }).toMatch(/^completed · 1 done, 0 failed, 0 pending of 1 photos/);
    await context.close();
  }, 120_000);
});

describe('uploads across console processes', () => {
  it('an upload begun on one console process continues on another, and the batch made there takes its bytes whole', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const stranger = await signUpOverHttp(stack, newEmail());
    const replica = await stack.replica();
    const bytes = photoBytes('Nikon_D70.jpg');
    const headers = { cookie: person.cookie, origin: stack.url, 'tus-resumable': '1.0.0' };
    const created = await fetch(`${stack.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { ...headers, 'upload-length': String(bytes.length), 'upload-metadata': `workspace ${Buffer.from(person.workspaceId).toString('base64')}` },
    });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    const half = Math.floor(bytes.length / 2);
    const firstHalf = await fetch(new URL(location, stack.url), { method: 'PATCH', headers: { ...headers, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, body: bytes.subarray(0, half) });
    expect(firstHalf.status).toBe(204);

    // The second process knows the upload from the shared datastore and database.
    const onReplica = new URL(location, replica.url);
    const head = await fetch(onReplica, { method: 'HEAD', headers });
    expect(head.status).toBe(200);
    expect(head.headers.get('upload-offset')).toBe(String(half));
    expect((await fetch(onReplica, { method: 'HEAD', headers: { ...headers, cookie: stranger.cookie } })).status).toBe(404);
    const rest = await fetch(onReplica, { method: 'PATCH', headers: { ...headers, 'upload-offset': String(half), 'content-type': 'application/offset+octet-stream' }, body: bytes.subarray(half) });
    expect(rest.status, await rest.clone().text()).toBe(204);
    expect(rest.headers.get('upload-offset')).toBe(String(bytes.length));
    const id = onReplica.pathname.split('/').pop()!;
    const sha = createHash('sha256').update(bytes).digest('hex');
    expect((await stack.pipeline.db.query('SELECT sha256 FROM uploads WHERE id = $1', [id])).rows).toEqual([{ sha256: sha }]);

    const started = await fetch(`${replica.url}/api/v1/workspaces/${person.workspaceId}/batches`, {
      method: 'POST',
      headers: { cookie: person.cookie, origin: stack.url, 'content-type': 'application/json' },
      body: JSON.stringify({ preset: 'quick-scan', uploads: [{ id, name: 'nikon.jpg' }] }),
    });
    expect(started.status, await started.clone().text()).toBe(202);
    const batchId = ((await started.json()) as { id: string }).id;
    const item = await stack.pipeline.db.query<{ sha256: string; source: string }>(`SELECT ref->>'sha256' AS sha256, source FROM batch_items WHERE batch_id = $1`, [batchId]);
    expect(item.rows).toEqual([{ sha256: sha, source: 'nikon.jpg' }]);
    // Taken: the upload's row is gone (its quota free); the bytes are in the blob store once, by hash.
    expect((await stack.pipeline.db.query('SELECT 1 FROM uploads WHERE id = $1', [id])).rowCount).toBe(0);
    expect(await blobStoreFromConfig(stack.pipeline.config).has(sha)).toBe(true);
  }, 120_000);
});

describe('a vehicle submission an attacker shapes', () => {
  it('refuses line breaks, bad VINs, repeated and foreign uploads, and both kinds at once, with 400 in the envelope, claiming nothing', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const stranger = await signUpOverHttp(stack, newEmail());
    const ws = person.workspaceId;
    const mine = await uploadVia(stack.url, person, ws, photoBytes('Canon_40D.jpg'));
    const theirs = await uploadVia(stack.url, stranger, stranger.workspaceId, photoBytes('Nikon_D70.jpg'));
    const submit = (body: unknown) => consoleCall(stack, person, 'POST', `/api/v1/workspaces/${ws}/batches`, body);
    const cases: Array<[string, unknown, RegExp]> = [
      ['line break in a name', { vehicles: [{ name: 'van\r\nBcc: x', uploads: [{ id: mine, name: 'a.jpg' }] }] }, /vehicles\.0\.name: must be one line/],
      ['line break in a photo name', { vehicles: [{ name: 'van', uploads: [{ id: mine, name: 'a\n.jpg' }] }] }, /must be one line/],
      ['not a VIN', { vehicles: [{ vehicle: { vin: 'WVWZZZ1JZ3W38675O' }, uploads: [{ id: mine, name: 'a.jpg' }] }] }, /vin: must be the 17 characters of a VIN/],
      ['the same upload twice', { vehicles: [{ uploads: [{ id: mine, name: 'a.jpg' }] }, { uploads: [{ id: mine, name: 'b.jpg' }] }] }, /body\.vehicles\.1\.uploads\.0: upload .* is named twice/],
      ['another workspace’s upload', { vehicles: [{ uploads: [{ id: mine, name: 'a.jpg' }, { id: theirs, name: 'b.jpg' }] }] }, /body\.vehicles\.0\.uploads\.1: no upload .* of yours in this workspace/],
      ['both kinds', { uploads: [{ id: mine, name: 'a.jpg' }], vehicles: [{ uploads: [{ id: mine, name: 'a.jpg' }] }] }, /either uploads \(photos\) or vehicles/],
      ['51 photos in a vehicle', { vehicles: [{ uploads: Array.from({ length: 51 }, (_, k) => ({ id: `upl_${String(k).padStart(32, '0')}`, name: `${k}.jpg` })) }] }, /vehicles\.0\.uploads/],
      ['a huge name', { vehicles: [{ name: 'x'.repeat(10_000), uploads: [{ id: mine, name: 'a.jpg' }] }] }, /vehicles\.0\.name/],
    ];
    for (const [what, body, message] of cases) {
      const r = await submit(body);
      expect(r.status, what).toBe(400);
      const err = expectEnvelope(await r.json());
      expect(err.code, what).toBe('VALIDATION_FAILED');
      expect(err.message, what).toMatch(message);
    }
    // Nothing was claimed or made: both uploads are as they were, no batch exists.
    expect((await stack.pipeline.db.query('SELECT id, taken_at FROM uploads WHERE id = ANY($1) ORDER BY id', [[mine, theirs].sort()])).rows).toEqual([mine, theirs].sort().map((id) => ({ id, taken_at: null })));
    expect((await stack.pipeline.db.query('SELECT 1 FROM batches WHERE user_id = $1', [ws])).rowCount).toBe(0);
    // And the honest submission of the same upload still works.
    const ok = await submit({ vehicles: [{ name: 'van', vehicle: { vin: VIN_1, mileage: 1 }, uploads: [{ id: mine, name: 'a.jpg' }] }] });
    expect(ok.status, await ok.clone().text()).toBe(202);
    expect(((await ok.json()) as { kind: string; counts: { total: number } })).toMatchObject({ kind: 'vehicles', counts: { total: 1 } });
  }, 120_000);
});

describe('a photo batch’s page', () => {
  it('shows failed photos first with their reason; a retry from the page runs one again and its card gets its thumbnail and each lens’s answer', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const ws = person.workspaceId;
    const files = ['gps-DSCN0010.jpg', 'mobile-jolla.jpg'];
    const ids = [];
    for (const f of files) ids.push(await uploadVia(stack.url, person, ws, photoBytes(f), f));
    // Every vendor refuses while the batch runs: both photos fail with the vendors' reason.
    for (const v of ['openai', 'anthropic', 'google'] as const) stack.pipeline.sim.setBehaviour(v, { failRate: 1, failure: 'http400' });
    let batchId: string;
    try {
      const started = await consoleCall(stack, person, 'POST', `/api/v1/workspaces/${ws}/batches`, { preset: 'quick-scan', uploads: ids.map((id, k) => ({ id, name: files[k]! })) });
      expect(started.status, await started.clone().text()).toBe(202);
      batchId = ((await started.json()) as { id: string }).id;
      await completedBatch(person, batchId);
    } finally {
      stack.pipeline.sim.reset();
    }
    const context = await signedInContext(person);
    const page = await context.newPage();
    await page.goto(`${stack.url}/batches/${batchId}`);
    // The batch page is its own chunk, loaded on this first visit: a wait, not a speed bound.
    await expect.poll(() => page.getByTestId('batch-status').textContent(), { timeout: 30_000, interval: 100 }).toMatch(/^completed · 0 done, 2 failed, 0 pending of 2 photos · 0 credits/);
    const cards = page.getByRole('list', { name: 'Photos' }).locator('> li');
    expect(await cards.count()).toBe(2);
    expect(await cards.nth(0).locator('.error').textContent()).toMatch(/^PROVIDER_ERROR: /);

    // The first photo runs again: afterwards the one still failed (the second) comes first.
    await page.getByRole('button', { name: 'Retry gps-DSCN0010.jpg' }).click();
    await expect.poll(() => page.getByTestId('batch-status').textContent(), { timeout: 120_000, interval: 250 }).toMatch(/^completed · 1 done, 1 failed, 0 pending of 2 photos · \d+ credits/);
    // The retried one shows its thumbnail and its lenses.
    expect(await cards.nth(0).getByRole('heading').textContent()).toBe('mobile-jolla.jpg');
    expect(await cards.nth(0).getByRole('button', { name: 'Retry mobile-jolla.jpg' }).count()).toBe(1);
    const done = cards.nth(1);
    expect(await done.getByRole('heading').textContent()).toBe('gps-DSCN0010.jpg');
    const img = done.getByRole('img', { name: 'Photo 1: gps-DSCN0010.jpg' });
    await expect.poll(() => img.evaluate((e) => (e as unknown as { naturalWidth: number }).naturalWidth)).toBe(256);
    const detail = (await (await consoleCall(stack, person, 'GET', `/api/v1/batch/${batchId}`)).json()) as { batch: { lenses: string[] } };
    expect((await done.locator('summary').allTextContents()).sort()).toEqual([...detail.batch.lenses].sort());
    expect(await done.getByRole('button').count()).toBe(0);
    // A failure past the pages loaded is still shown first: the first page carries the batch's first
    // failed items wherever they are (here a page of one photo; the failed one is the second).
    const firstPage = (await (await consoleCall(stack, person, 'GET', `/api/v1/batch/${batchId}?limit=1`)).json()) as { items: Array<{ index: number; status: string }>; failed: Array<{ index: number; source: string; status: string; error: { code: string } | null }>; nextAfter: number | null };
    expect(firstPage.items.map((i) => [i.index, i.status])).toEqual([[0, 'done']]);
    expect(firstPage.nextAfter).toBe(0);
    expect(firstPage.failed.map((i) => [i.index, i.source, i.status, i.error?.code])).toEqual([[1, 'mobile-jolla.jpg', 'failed', 'PROVIDER_ERROR']]);
    const nextPage = (await (await consoleCall(stack, person, 'GET', `/api/v1/batch/${batchId}?after=0&limit=1`)).json()) as { failed: unknown[] };
    expect(nextPage.failed).toEqual([]);
    expect(await page.getByRole('status').filter({ hasText: 'runs again' }).textContent()).toBe('gps-DSCN0010.jpg runs again.');
    expect(await seriousA11yViolations(page)).toEqual([]);
    // Phone: a vendor's long reason wraps inside its card; nothing scrolls sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.setViewportSize({ width: 1280, height: 900 });
    await screenshot(page, 'batch-photos');
    await context.close();
  }, 240_000);
});

describe('an upload across a page reload', () => {
  /** The upload URLs the page keeps (web/ui/src/upload-urls.ts: IndexedDB `lenstack-uploads`, store `urls`). */
  const keptUrls = (page: import('playwright-core').Page): Promise<string[]> =>
    page.evaluate(`new Promise((resolve, reject) => {
      const open = indexedDB.open('lenstack-uploads');
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const db = open.result;
        if (!db.objectStoreNames.contains('urls')) return resolve([]);
        const req = db.transaction('urls').objectStore('urls').getAllKeys();
        req.onsuccess = () => resolve(req.result.map(String));
        req.onerror = () => reject(req.error);
      };
    })`);

  /** `n` distinct photos written as files into a fresh folder, for the picker. */
  const photoFiles = async (seed: number, n: number): Promise<string[]> => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lenstack-photos-'));
    return (await distinctPhotos(seed, n)).map((b64, k) => {
      const file = path.join(dir, `${k}.jpg`);
      writeFileSync(file, Buffer.from(b64, 'base64'));
      return file;
    });
  };

  /** The page's first batch submission is refused on its way (as a lost tab or a failed start would leave it): its photos are uploaded, no batch is made. */
  const holdBackFirstBatch = async (page: import('playwright-core').Page) => {
    let held = 0;
    await page.route(/\/api\/v1\/workspaces\/[^/]+\/batches$/, async (route) => {
      if (route.request().method() !== 'POST' || held++ > 0) return route.fallback();
      await route.fulfill({ status: 400, contentType: 'application/json', body: JSON.stringify({ error: { code: 'VALIDATION_FAILED', message: 'Held back by the test', retryable: false, requestId: 'test' } }) });
    });
  };

  /** Picks `files` on the photo batch form of a browser whose IndexedDB `breakStorage` breaks, and waits for the batch to start. */
  const startWithBrokenStorage = async (breakStorage: string, files: string[]) => {
    const context = await signedInContext(await signUpOverHttp(stack, newEmail()));
    await context.addInitScript(breakStorage);
    const page = await context.newPage();
    await page.goto(`${stack.url}/batches`);
    await page.getByRole('button', { name: 'New batch' }).click();
    await page.getByLabel('Choose photos').setInputFiles(files);
    await page.getByRole('button', { name: `Upload ${files.length} and start the batch` }).click();
    const started = page.getByRole('status').filter({ hasText: /^Batch bat_/ });
    await expect.poll(() => started.count(), { timeout: 60_000 }).toBe(1);
    return { context, page, text: await started.textContent() };
  };

  it('a fleet whose photos all finished before a reload is not sent again: the same folder chosen again makes the batch from the same uploads', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const ws = person.workspaceId;
    const root = path.join(mkdtempSync(path.join(tmpdir(), 'lenstack-fleet-reload-')), 'fleet');
    const photos = (await distinctPhotos(9100, 6)).map((b64) => Buffer.from(b64, 'base64'));
    // Two vehicles' folders holding a photo of the same name, size and time: one upload each all the same.
    photos.forEach((bytes, k) => {
      const folder = path.join(root, k < 3 ? 'car-a' : 'car-b');
      mkdirSync(folder, { recursive: true });
      writeFileSync(path.join(folder, `${k % 3}.jpg`), k === 3 ? photos[0]! : bytes);
      utimesSync(path.join(folder, `${k % 3}.jpg`), new Date(1_700_000_000_000), new Date(1_700_000_000_000));
    });
    const context = await signedInContext(person);
    const page = await context.newPage();
    await holdBackFirstBatch(page);
    const chooseFleet = async () => {
      await page.getByRole('button', { name: 'New batch' }).click();
      await page.getByLabel('Vehicles (a folder per vehicle)').check();
      await page.getByLabel('Choose the fleet folder').setInputFiles(root);
      await page.getByRole('button', { name: 'Upload 6 photos and analyze 2 vehicle(s)' }).click();
    };
    await page.goto(`${stack.url}/batches`);
    await chooseFleet();
    await expect.poll(() => page.getByText('Held back by the test').count(), { timeout: 60_000 }).toBe(1);
    const before = (await stack.pipeline.db.query<{ id: string }>('SELECT id FROM uploads WHERE user_id = $1 AND sha256 IS NOT NULL ORDER BY id', [ws])).rows.map((r) => r.id);
    expect(before).toHaveLength(6);
    expect(await keptUrls(page)).toHaveLength(6);
    const creations = () => stack.logs.map((l) => JSON.parse(l) as { req?: { method: string; url: string } }).filter((l) => l.req?.method === 'POST' && l.req.url === '/api/v1/uploads').length;
    const made = creations();

    await page.reload();
    await chooseFleet();
    const started = page.getByRole('status').filter({ hasText: /^Batch bat_/ });
    await expect.poll(() => started.count(), { timeout: 60_000 }).toBe(1);
    expect(await started.textContent()).toMatch(/^Batch bat_\S+ started with 2 vehicles\.$/);
    // No photo was created or sent again: each was found finished (HEAD) and the batch took the six.
    expect(creations()).toBe(made);
    const requests = stack.logs.map((l) => JSON.parse(l) as { req?: { method: string; url: string } }).filter((l) => l.req?.method === 'HEAD');
    for (const id of before) expect(requests.some((l) => l.req!.url === `/api/v1/uploads/${id}`), id).toBe(true);
    expect((await stack.pipeline.db.query('SELECT 1 FROM uploads WHERE user_id = $1', [ws])).rowCount).toBe(0);
    // Taken, they are forgotten: the page keeps no upload URL for them.
    await expect.poll(() => keptUrls(page)).toEqual([]);
    await context.close();
  }, 180_000);

  it('a browser whose storage for upload URLs is full still uploads every photo and starts the batch (they are only not resumable)', async () => {
    // Every write to IndexedDB fails as a full origin's does.
    const { context, page, text } = await startWithBrokenStorage(
      `IDBObjectStore.prototype.put = function () { throw new DOMException('The quota has been exceeded.', 'QuotaExceededError'); };`,
      await photoFiles(9200, 3),
    );
    expect(text).toMatch(/^Batch bat_\S+ started with 3 photos\.$/);
    expect(await keptUrls(page)).toEqual([]);
    await context.close();
  }, 180_000);

  it('a browser whose IndexedDB never answers still uploads every photo and starts the batch', async () => {
    // Opening the database gives a request whose events never come.
    const { context, text } = await startWithBrokenStorage(`indexedDB.open = () => ({})`, await photoFiles(9400, 6));
    expect(text).toMatch(/^Batch bat_\S+ started with 6 photos\.$/);
    await context.close();
  }, 180_000);

  it('signing out forgets the upload URLs the page kept (workspaces and folder paths stay with nobody)', async () => {
    const files = await photoFiles(9300, 2);
    const context = await signedInContext(await signUpOverHttp(stack, newEmail()));
    const page = await context.newPage();
    // Both photos uploaded, their URLs kept for a retry.
    await holdBackFirstBatch(page);
    await page.goto(`${stack.url}/batches`);
    await page.getByRole('button', { name: 'New batch' }).click();
    await page.getByLabel('Choose photos').setInputFiles(files);
    await page.getByRole('button', { name: 'Upload 2 and start the batch' }).click();
    await expect.poll(() => page.getByText('Held back by the test').count(), { timeout: 60_000 }).toBe(1);
    expect(await keptUrls(page)).toHaveLength(2);
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL(/\/sign-in$/);
    expect(await keptUrls(page)).toEqual([]);
    await context.close();
  }, 180_000);

  it('the same file chosen again after a reload continues its upload from the bytes the server has, not from zero', async () => {
    const person = await signUpOverHttp(stack, newEmail());
    const ws = person.workspaceId;
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'lenstack-reload-')), 'big.jpg');
    const bytes = photoBytes('heic-IMG_5195.heif-convert.jpg');
    writeFileSync(file, bytes);
    const context = await signedInContext(person);
    const page = await context.newPage();
    // A slow uplink (DevTools' own throttling): the upload is still under way when the page reloads.
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 256 * 1024 });
    await page.goto(`${stack.url}/batches`);
    await page.getByRole('button', { name: 'New batch' }).click();
    await page.getByLabel('Choose photos').setInputFiles(file);
    await page.getByRole('button', { name: 'Upload 1 and start the batch' }).click();
    // The server holds part of it (the datastore beside the blob store; uploads/tus.ts).
    const pc = stack.pipeline.config;
    const datastore = path.join(path.dirname(path.resolve(pc.BLOB_DIR)), `${path.basename(pc.BLOB_DIR)}-uploads`);
    const row = async () => (await stack.pipeline.db.query<{ id: string }>('SELECT id FROM uploads WHERE user_id = $1', [ws])).rows;
    await expect.poll(async () => (await row()).length, { timeout: 30_000 }).toBe(1);
    const [{ id }] = (await row()) as [{ id: string }];
    const held = () => statSync(path.join(datastore, id), { throwIfNoEntry: false })?.size ?? 0;
    await expect.poll(held, { timeout: 30_000, interval: 20 }).toBeGreaterThan(0);
    await page.reload();
    const before = held();
    expect(before).toBeLessThan(bytes.length);

    // After the reload, at full speed: the same file, the same upload (its URL kept in IndexedDB).
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    await page.getByRole('button', { name: 'New batch' }).click();
    await page.getByLabel('Choose photos').setInputFiles(file);
    await page.getByRole('button', { name: 'Upload 1 and start the batch' }).click();
    const started = page.getByRole('status').filter({ hasText: /^Batch bat_/ });
    await expect.poll(() => started.count(), { timeout: 60_000 }).toBe(1);
    const batchId = /Batch (bat_\S+) started/.exec((await started.textContent())!)![1]!;
    // The page asked the server for the offset of the upload it had begun (tus-js-client's resume).
    const requests = stack.logs.map((l) => JSON.parse(l) as { req?: { method: string; url: string } }).filter((l) => l.req?.url?.startsWith('/api/v1/uploads'));
    expect(requests.some((l) => l.req!.method === 'HEAD' && l.req!.url === `/api/v1/uploads/${id}`)).toBe(true);
    const item = await stack.pipeline.db.query<{ sha256: string }>(`SELECT ref->>'sha256' AS sha256 FROM batch_items WHERE batch_id = $1`, [batchId]);
    expect(item.rows).toEqual([{ sha256: createHash('sha256').update(bytes).digest('hex') }]);
    // The batch took the upload begun before the reload (taken uploads are deleted; a second upload
    // made after the reload would have left this one behind).
    expect((await stack.pipeline.db.query('SELECT 1 FROM uploads WHERE user_id = $1', [ws])).rowCount).toBe(0);
    await context.close();
  }, 180_000);
});
