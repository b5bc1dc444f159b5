import { execFile, spawn } from 'node:child_process';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseCsv } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance, grant } from '../../credits/ledger.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { createMetadataTool, type MetadataTool } from '../../enrich/exiftool.ts';
import { createTestAccount, type TestAccount } from '../helpers/app.ts';
import { PHOTOS_DIR, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startCanaryAndPublic, type Canary, type PublicServer } from '../images/servers.ts';
import { getLens, outputFields } from '../../lenses/index.ts';

/**
 * The `lenstack` CLI end to end: each call a child process (`node clients/cli/bin/lenstack.js`,
 * what the package.json bin runs) against the API listening on a port, with a real worker,
 * Temporal and simulated vendors. The child runs asynchronously: the API answering it lives in
 * this process. Photo URLs are served from 127.0.0.2, which plays a public host (the API's fetch
 * policy lets it through; the canary on 127.0.0.1 must never see a connection).
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'clients/cli/bin/lenstack.js');

let p: Pipeline;
let baseUrl: string;
let user: TestAccount;
let work: string;
let tool: MetadataTool;
let canary: Canary;
let server: PublicServer;

beforeAll(async () => {
  ({ canary, server } = await startCanaryAndPublic(photoBytes('mobile-jolla.jpg')));
  const fetchPolicy = { ...PUBLIC_INTERNET, allowAddress: (ip: string) => ip === '127.0.0.2' || isPublicAddress(ip), timeoutMs: 3000 };
  p = await startPipeline({ fetchPolicy, deps: { fetchPolicy } });
  baseUrl = await p.app.listen({ port: 0, host: '127.0.0.1' });
  user = await createTestAccount(p.db, { community: 100 });
  work = await mkdtemp(join(tmpdir(), 'lenstack-cli-'));
  tool = createMetadataTool({ maxProcs: 1 });
}, 120_000);
afterAll(async () => {
  await tool?.end();
  await rm(work, { recursive: true, force: true });
  await p?.close();
  await server?.close();
  await canary?.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function lenstack(args: string[], env: Record<string, string | undefined> = {}, command = [process.execPath, BIN], timeoutMs = 25_000): Promise<Run> {
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  const merged = { LENSTACK_API_KEY: user.liveKey, LENSTACK_BASE_URL: baseUrl, ...env };
  for (const [k, v] of Object.entries(merged)) if (v !== undefined) childEnv[k] = v;
  return new Promise((resolve) => {
    execFile(command[0]!, [...command.slice(1), ...args], { cwd: work, env: childEnv, maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}
const photo = (name: string) => join(PHOTOS_DIR, name);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('lenstack CLI', () => {
  it('npx lenstack --help works from the repository (the package.json bin)', async () => {
    // npx resolves the bin through npm first: seconds on an idle machine, far more on a loaded one.
    const run = await lenstack(['--help'], {}, ['npx', '--no-install', '--prefix', ROOT, 'lenstack'], 80_000);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('lenstack analyze <photo|url>...');
    expect(run.stdout).toContain('lenstack batch --vehicles <folder> [--manifest <vehicles.csv>]');
    expect(run.stdout).toMatch(/4 not enough credits/);
  }, 90_000);

  it('analyze --json prints the analysis; the readable form shows the lens columns; nothing on stderr off a terminal', async () => {
    const json = await lenstack(['analyze', photo('Canon_40D.jpg'), '--lens', 'dating', '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toBe('');
    const analysis = JSON.parse(json.stdout);
    expect(analysis).toMatchObject({ object: 'analysis', usage: { creditsCharged: 1, modulesUsed: expect.arrayContaining(['dating']) } });
    expect(analysis.fingerprint.sha256).toBe(sha256(photoBytes('Canon_40D.jpg')));
    const year = analysis.output.estimatedDate.year as number;
    expect(typeof year).toBe('number');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 99 });

    const readable = await lenstack(['analyze', photo('Canon_40D.jpg'), '--lens', 'dating']);
    expect(readable.code, readable.stderr).toBe(0);
    expect(readable.stderr).toBe('');
    expect(readable.stdout).toContain('Canon_40D.jpg');
    expect(readable.stdout).toContain(`sha256 ${analysis.fingerprint.sha256}`);
    expect(readable.stdout).toContain('0 credits');
    expect(readable.stdout).toMatch(new RegExp(`Year\\s+${year}\\n`));
    expect(readable.stdout).toMatch(new RegExp(`Date confidence\\s+${Math.round(analysis.output.estimatedDate.confidence * 100)}%`));
  });

  it('lookup after analyze finds the photo for free, by file and by fingerprint; an unknown photo is none', async () => {
    const analysis = JSON.parse((await lenstack(['analyze', photo('Nikon_D70.jpg'), '--lens', 'dating', '--json'])).stdout);
    const sha = analysis.fingerprint.sha256 as string;
    const before = await getBalance(p.db, user.userId);

    const byFile = await lenstack(['lookup', photo('Nikon_D70.jpg'), '--json']);
    expect(byFile.code, byFile.stderr).toBe(0);
    const found = JSON.parse(byFile.stdout);
    expect(found.results[sha]).toMatchObject({ matchType: 'exact', photo: { sha256: sha, lenses: { dating: { output: { estimatedDate: analysis.output.estimatedDate } } } } });

    const bySha = await lenstack(['lookup', '--sha256', sha]);
    expect(bySha.code, bySha.stderr).toBe(0);
    expect(bySha.stdout).toMatch(new RegExp(`^${sha}\\s+exact\\s+sha256 ${sha}\\s+lenses: dating`, 'm'));
    expect(bySha.stdout).toContain('1 of 1 found');

    const none = await lenstack(['lookup', photo('Pentax_K10D.jpg')]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toMatch(/^Pentax_K10D\.jpg\s+none/m);
    expect(await getBalance(p.db, user.userId)).toEqual(before);
  });

  it('analyzes a HEIC photo from the fixtures end to end, and a photo given by URL', async () => {
    const heic = await lenstack(['analyze', photo('heic-IMG_5195.HEIC'), '--lens', 'dating', '--json']);
    expect(heic.code, heic.stderr).toBe(0);
    const analysis = JSON.parse(heic.stdout);
    expect(analysis).toMatchObject({ object: 'analysis', usage: { creditsCharged: 1 } });
    expect(analysis.fingerprint.sha256).toBe(sha256(photoBytes('heic-IMG_5195.HEIC')));
    // The dating lens's whole output as the lens defines it (the simulator's values follow the pixels it was sent).
    const dating = getLens('dating');
    const fields = Object.fromEntries(outputFields(dating).map((field) => [field, analysis.output[field]]));
    expect(dating.output.safeParse(fields).error).toBeUndefined();

    const url = `${server.origin}/image.jpg`;
    const byUrl = await lenstack(['analyze', url, '--lens', 'dating']);
    expect(byUrl.code, byUrl.stderr).toBe(0);
    expect(byUrl.stdout.split('\n')[0]).toBe(url);
    expect(byUrl.stdout).toContain(`sha256 ${sha256(photoBytes('mobile-jolla.jpg'))}`);
    expect(byUrl.stdout).toContain('1 credit');
    expect(server.hits.get('/image.jpg')).toBe(1);
    expect(canary.connections()).toBe(0);
  });

  it('analyze --json of several photos prints what was billed before a failure that stops it, the error in its slot', async () => {
    const poor = await createTestAccount(p.db, { community: 1 });
    const run = await lenstack(['analyze', photo('Canon_40D.jpg'), photo('Nikon_D70.jpg'), photo('Pentax_K10D.jpg'), '--lens', 'dating', '--json'], { LENSTACK_API_KEY: poor.liveKey });
    expect(run.code).toBe(4);
    const results = JSON.parse(run.stdout);
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ file: 'Canon_40D.jpg', analysis: { usage: { creditsCharged: 1 } } });
    expect(results[1]).toMatchObject({ file: 'Nikon_D70.jpg', error: { code: 'PLAN_LIMIT_EXCEEDED', status: 402 } });
    expect(JSON.parse(run.stderr)).toMatchObject({ error: { code: 'PLAN_LIMIT_EXCEEDED' }, exitCode: 4 });
    expect(await getBalance(p.db, poor.userId)).toMatchObject({ community: 0 });
  });

  it('enrich names its output beside the photo, replaces it only with --force, and charges nothing when it could not write', async () => {
    const dir = join(work, 'enrich-default');
    await mkdir(dir);
    const input = join(dir, 'landscape.jpg');
    await copyFile(photo('orientation-landscape_6.jpg'), input);
    await lenstack(['analyze', input, '--lens', 'describe']);
    const first = await lenstack(['enrich', input]);
    expect(first.code, first.stderr).toBe(0);
    const out = join(dir, 'landscape.enriched.jpg');
    expect(first.stdout).toBe(`wrote ${out}: exif, iptc, xmp; 5 credits (request ${first.stdout.match(/request (\S+)\)/)![1]})\n`);
    expect((await tool.read(out))['XMP-dc:Title']).toEqual(expect.any(String));

    const before = await getBalance(p.db, user.userId);
    const refused = await lenstack(['enrich', input]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`${out} exists; pass --force`);
    await writeFile(out, 'an older file');
    const forced = await lenstack(['enrich', input, '--force', '--json']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(JSON.parse(forced.stdout)).toMatchObject({ output: out, formatsWritten: ['exif', 'iptc', 'xmp'] });
    expect((await readFile(out)).subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: before.community - 5 });

    // Nowhere to write: refused before the API is asked, so nothing is charged.
    const afterForce = await getBalance(p.db, user.userId);
    const noDir = await lenstack(['enrich', input, '-o', join(dir, 'missing', 'x.jpg')]);
    expect(noDir.code).toBe(2);
    expect(noDir.stderr).toContain('cannot write');
    const readonly = join(dir, 'readonly');
    await mkdir(readonly);
    await chmod(readonly, 0o555);
    const noWrite = await lenstack(['enrich', input, '-o', join(readonly, 'x.jpg')]);
    // root writes anywhere: there the write succeeds (and charges); elsewhere it is refused first.
    if (process.getuid?.() !== 0) {
      expect(noWrite.code).toBe(2);
      expect(noWrite.stderr).toContain('cannot write');
    }
    const charged = noWrite.code === 0 ? 5 : 0;
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: afterForce.community - charged });
    // No partial file is left behind.
    expect((await readdir(dir)).filter((f) => f.includes('partial'))).toEqual([]);
  });

  it('enrich writes the photo with the lens output in its metadata, read back by exiftool; it never overwrites without --force', async () => {
    const analysis = JSON.parse((await lenstack(['analyze', photo('orientation-landscape_1.jpg'), '--lens', 'describe', '--json'])).stdout);
    const out = join(work, 'enriched.jpg');
    const run = await lenstack(['enrich', photo('orientation-landscape_1.jpg'), '-o', out]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^wrote .*enriched\.jpg: exif, iptc, xmp; 5 credits/);
    const tags = await tool.read(out);
    expect(tags['XMP-dc:Title']).toBe(analysis.output.title);
    expect(tags['IPTC:Headline']).toBe(analysis.output.title);
    expect(tags['XMP-dc:Description']).toBe(analysis.output.caption);

    const again = await lenstack(['enrich', photo('orientation-landscape_1.jpg'), '-o', out]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('exists; pass --force');
  });

  it('batch on a folder follows the batch and exports xlsx, read back', async () => {
    const folder = join(work, 'holiday');
    await mkdir(join(folder, 'day2'), { recursive: true });
    await copyFile(photo('gps-DSCN0010.jpg'), join(folder, 'a.jpg'));
    await copyFile(photo('gps-DSCN0012.jpg'), join(folder, 'b.jpg'));
    await copyFile(photo('gps-DSCN0021.jpg'), join(folder, 'day2', 'c.jpg'));
    await writeFile(join(folder, 'notes.txt'), 'not a photo');
    const xlsx = join(work, 'holiday.xlsx');

    const run = await lenstack(['batch', folder, '--lens', 'dating', '--export', xlsx, '--json']);
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout);
    expect(result.batch).toMatchObject({ status: 'completed', counts: { total: 3, done: 3, failed: 0, pending: 0 }, creditsCharged: 3 });
    expect(result.failed).toEqual([]);
    expect(result.export).toBe(xlsx);

    const book = new ExcelJS.Workbook();
    await book.xlsx.load((await readFile(xlsx)) as never);
    const sheet = book.worksheets[0]!;
    const rows = [2, 3, 4].map((r) => [sheet.getRow(r).getCell(2).value, sheet.getRow(r).getCell(3).value, sheet.getRow(r).getCell(4).value]);
    expect(rows).toEqual([
      ['a.jpg', 'done', sha256(photoBytes('gps-DSCN0010.jpg'))],
      ['b.jpg', 'done', sha256(photoBytes('gps-DSCN0012.jpg'))],
      [join('day2', 'c.jpg'), 'done', sha256(photoBytes('gps-DSCN0021.jpg'))],
    ]);
    expect(sheet.getRow(5).getCell(1).value).toBeNull();

    const readable = await lenstack(['batch', join(folder, 'a.jpg'), '--lens', 'dating']);
    expect(readable.code, readable.stderr).toBe(0);
    // The photo already has the lens: 0 credits.
    expect(readable.stdout).toMatch(/^batch bat_\S+ completed: 1 done, 0 failed, 0 pending; 0 credits$/m);
  });

  it('Ctrl-C while the export downloads exits 130 and leaves neither the export nor its partial file', async () => {
    const folder = join(work, 'ctrl-c-export');
    await mkdir(folder);
    await copyFile(photo('gps-DSCN0010.jpg'), join(folder, 'a.jpg'));
    const csv = join(work, 'ctrl-c-export.csv');
    // Everything passes but the export's body: its headers and first half are sent, then nothing more.
    const proxy = await startExportProxy(baseUrl, 'stall');
    let stderr = '';
    try {
      const child = spawn(process.execPath, [BIN, 'batch', folder, '--lens', 'dating', '--export', csv], {
        cwd: work,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LENSTACK_API_KEY: user.liveKey, LENSTACK_BASE_URL: proxy.url },
      });
      child.stderr.on('data', (c) => (stderr += c));
      const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
      await proxy.halfSent;
      // The partial file is there while the download waits for the rest.
      expect((await readdir(work)).filter((f) => f.startsWith('ctrl-c-export.csv.partial-'))).toHaveLength(1);
      child.kill('SIGINT');
      expect(await exited, stderr).toBe(130);
    } finally {
      await proxy.close();
    }
    expect(stderr).toContain(`lenstack: batch bat_`);
    expect(stderr).toContain(`interrupted: nothing was written to ${csv}`);
    expect((await readdir(work)).filter((f) => f.startsWith('ctrl-c-export.csv'))).toEqual([]);
  });

  it('an export cut off mid-download exits 6 and leaves no file behind; the same command writes it in full', async () => {
    const folder = join(work, 'cut-export');
    await mkdir(folder);
    await copyFile(photo('gps-DSCN0010.jpg'), join(folder, 'a.jpg'));
    await copyFile(photo('gps-DSCN0012.jpg'), join(folder, 'b.jpg'));
    const csv = join(work, 'cut-export.csv');
    // Everything passes but the export's body: its headers and first half are sent, then the socket is destroyed.
    const proxy = await startExportProxy(baseUrl, 'cut');
    let cut: Run;
    try {
      cut = await lenstack(['batch', folder, '--lens', 'dating', '--export', csv], { LENSTACK_BASE_URL: proxy.url });
    } finally {
      await proxy.close();
    }
    expect(proxy.halves()).toBe(1);
    expect(cut.code, cut.stderr).toBe(6);
    expect(cut.stderr).toContain(`the download of ${csv} broke off`);
    expect(cut.stderr).toContain('run the same command again');
    // Neither the export nor its partial file is left.
    expect((await readdir(work)).filter((f) => f.startsWith('cut-export.csv'))).toEqual([]);

    const again = await lenstack(['batch', folder, '--lens', 'dating', '--export', csv, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('was submitted by an earlier run');
    const rows = parseCsv(await readFile(csv, 'utf8'), { columns: true, bom: true }) as Array<Record<string, string>>;
    expect(rows.map((r) => [r.Source, r.Status])).toEqual([
      ['a.jpg', 'done'],
      ['b.jpg', 'done'],
    ]);
  });

  it('batch exits 4 when the batch pauses for credits and 5 when photos failed; says the batch id at once', async () => {
    const poor = await createTestAccount(p.db, { community: 1 });
    const folder = join(work, 'poor');
    await mkdir(folder);
    await copyFile(photo('orientation-portrait_8.jpg'), join(folder, 'a.jpg'));
    await copyFile(photo('xmp-BlueSquare.jpg'), join(folder, 'b.jpg'));
    const paused = await lenstack(['batch', folder, '--lens', 'dating', '--json'], { LENSTACK_API_KEY: poor.liveKey });
    expect(paused.code, paused.stderr).toBe(4);
    const result = JSON.parse(paused.stdout);
    expect(result.batch).toMatchObject({ status: 'paused', pauseReason: 'credits', counts: { total: 2, done: 1, pending: 1 } });
    expect(paused.stderr).toContain(`batch ${result.batch.id} submitted`);
    expect(paused.stderr).toContain(`batch ${result.batch.id} paused: not enough credits`);
    // After a purchase, `batch resume` continues it and follows it to the end.
    await grant(p.db, { accountId: poor.userId, pool: 'purchased', amount: 5, idempotencyKey: 'cli-resume-purchase' });
    const resumed = await lenstack(['batch', 'resume', result.batch.id], { LENSTACK_API_KEY: poor.liveKey });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain(`batch ${result.batch.id} resumed`);
    expect(resumed.stdout).toMatch(new RegExp(`^batch ${result.batch.id} completed: 2 done, 0 failed, 0 pending; 2 credits$`, 'm'));
    // Again: it is finished; followed, not resumed, and nothing more is charged.
    const again = await lenstack(['batch', 'resume', result.batch.id], { LENSTACK_API_KEY: poor.liveKey });
    expect(again.code).toBe(0);
    expect(again.stderr).not.toContain('resumed');
    expect(await getBalance(p.db, poor.userId)).toMatchObject({ community: 0, purchased: 4, reserved: 0 });
    // Another account's batch is not found; a malformed id is a usage error.
    expect((await lenstack(['batch', 'resume', result.batch.id])).code).toBe(5);
    expect((await lenstack(['batch', 'resume', 'not-a-batch'])).code).toBe(2);

    const mixed = join(work, 'mixed');
    await mkdir(mixed);
    await copyFile(photo('xmp-no_exif.jpg'), join(mixed, 'good.jpg'));
    await writeFile(join(mixed, 'bad.jpg'), 'not a photo at all');
    const failed = await lenstack(['batch', mixed, '--lens', 'dating']);
    expect(failed.code, failed.stderr).toBe(5);
    // The API refuses bad.jpg's bytes when its upload finishes: it is reported, and not in the batch.
    expect(failed.stdout).toMatch(/^batch (bat_\S+) completed: 1 done, 0 failed, 0 pending; 1 credits$/m);
    expect(failed.stdout).toMatch(/refused at upload, not in the batch:\n\s+bad\.jpg\s+IMAGE_INVALID: /);
    const id = failed.stdout.match(/^batch (bat_\S+)/m)![1]!;
    expect(failed.stderr).toContain(`batch ${id} submitted (1 photo)`);
    expect(failed.stderr).toContain(`batch ${id}: 1 photo was refused at upload and not analyzed.`);
    const items = await p.db.query<{ source: string }>('SELECT source FROM batch_items WHERE batch_id = $1', [id]);
    expect(items.rows.map((r) => r.source)).toEqual(['good.jpg']);
  });

  it('batch refuses a vehicle over 50 photos, a bad manifest and an --export that exists before uploading or submitting anything', async () => {
    const fleet = join(work, 'fleet-refused');
    await mkdir(join(fleet, 'van-1'), { recursive: true });
    await mkdir(join(fleet, 'van-2'));
    await mkdir(join(fleet, 'empty'));
    for (let i = 0; i < 51; i++) await copyFile(photo('Canon_40D.jpg'), join(fleet, 'van-1', `p${String(i).padStart(2, '0')}.jpg`));
    await copyFile(photo('Nikon_D70.jpg'), join(fleet, 'van-2', 'front.jpg'));
    await writeFile(join(fleet, 'vehicles.csv'), 'folder,vin,mileage\nvan-1,WVWZZZ1JZ3W386752,1000\nvan-2,WVWZZZ1JZ3W38675O,12 000\nvan-9,,\n');
    const uploadsBefore = await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId]);
    // This workspace's batches only: other test files share the database and make batches of their own.
    const batchesBefore = await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId]);
    const refused = await lenstack(['batch', '--vehicles', fleet]);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toContain('refused before uploading anything');
    expect(refused.stderr).toContain('vehicle "van-1" has 51 photos: a vehicle takes at most 50');
    expect(refused.stderr).toContain('vehicle "empty" has no photos');
    expect(refused.stderr).toMatch(/vehicles\.csv line 3 \("van-2"\): bad VIN "WVWZZZ1JZ3W38675O"/);
    expect(refused.stderr).toMatch(/vehicles\.csv line 3 \("van-2"\): bad mileage "12 000"/);
    expect(refused.stderr).toMatch(/vehicles\.csv line 4 \("van-9"\): no folder "van-9"/);
    // --json names each problem too.
    const json = await lenstack(['batch', '--vehicles', fleet, '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'USAGE', message: expect.stringContaining('van-1') }, exitCode: 2 });
    // A manifest whose header names an unknown column, given with --manifest.
    const manifest = join(work, 'typo.csv');
    await writeFile(manifest, 'folder,vim\nvan-2,x\n');
    const typo = await lenstack(['batch', '--vehicles', fleet, '--manifest', manifest]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('unknown: "vim"');
    expect((await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(uploadsBefore.rows[0].n);
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId])).rows[0].n).toBe(batchesBefore.rows[0].n);
    // Nothing was kept for a run that never started.
    expect(await readdir(fleet)).not.toContain('.lenstack-batch.json');
    const before = batchesBefore;

    const existing = join(work, 'existing.csv');
    await writeFile(existing, 'keep me');
    const exists = await lenstack(['batch', photo('Canon_40D.jpg'), '--lens', 'dating', '--export', existing]);
    expect(exists.code).toBe(2);
    expect(exists.stderr).toContain(`${existing} exists; pass --force`);
    expect(await readFile(existing, 'utf8')).toBe('keep me');
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId])).rows[0].n).toBe(before.rows[0].n);
    expect((await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(uploadsBefore.rows[0].n);

    const forced = await lenstack(['batch', photo('Canon_40D.jpg'), '--lens', 'dating', '--export', existing, '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(await readFile(existing, 'utf8')).toMatch(/^\uFEFF?"#","Source","Status"/);
  });

  it('draws the progress bar on a terminal (a real pty from script(1)) and clears it', async () => {
    // A state file of its own: the same command from `work` earlier made its batch already (and would follow it).
    const command = [process.execPath, BIN, 'batch', photo('Canon_40D.jpg'), '--lens', 'dating', '--state', join(work, 'pty-state.json')].map((a) => `'${a}'`).join(' ');
    const run = await new Promise<Run>((resolve) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: work, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LENSTACK_API_KEY: user.liveKey, LENSTACK_BASE_URL: baseUrl, COLUMNS: '80' } });
      let out = '';
      child.stdout.on('data', (c) => (out += c));
      child.on('close', (code) => resolve({ code: code ?? -1, stdout: out, stderr: '' }));
    });
    expect(run.code, run.stdout).toBe(0);
    expect(run.stdout).toMatch(/\r\x1b\[2Kbatch \[[#-]+\] \d\/1/);
    // The upload's own bar (photos, bytes) came first, and was cleared too.
    expect(run.stdout).toMatch(/\r\x1b\[2Kupload \[#+\] 1\/1  8 KiB of 8 KiB[^\r]*\r\x1b\[2K/);
    // Cleared before the summary is printed.
    expect(run.stdout).toMatch(/\r\x1b\[2Kbatch bat_\S+ completed: 1 done/);
  });

  it('runs the examples: examples/analyze.ts and examples/batch.ts', async () => {
    const tsx = [process.execPath, join(ROOT, 'node_modules/tsx/dist/cli.mjs')];
    const analyzed = await lenstack([join(ROOT, 'examples/analyze.ts'), photo('hdr-canon_hdr_NO.jpg')], {}, tsx);
    expect(analyzed.code, analyzed.stderr).toBe(0);
    expect(analyzed.stdout).toMatch(/^taken around \d{4} \(\d+% sure\)$/m);
    expect(analyzed.stdout).toMatch(/^2 credits, request req_/m);
    expect(analyzed.stdout).toContain('registry: dating, describe, moderation');

    const folder = join(work, 'example-batch');
    await mkdir(folder);
    await copyFile(photo('hdr-canon_hdr_NO.jpg'), join(folder, 'one.jpg'));
    await copyFile(photo('hdr-canon_hdr_YES.jpg'), join(folder, 'two.jpg'));
    const csv = join(work, 'example.csv');
    const batched = await lenstack([join(ROOT, 'examples/batch.ts'), folder, csv], {}, tsx);
    expect(batched.code, batched.stderr).toBe(0);
    // hdr_NO already has both lenses from the run above: only hdr_YES is billed.
    expect(batched.stdout).toMatch(/^completed, 2 credits; wrote /m);
    const rows = (await readFile(csv, 'utf8')).replace(/^\uFEFF/, '').trim().split('\r\n');
    // Every field quoted (docs/decisions.md, "Batch exports: the writers").
    expect(rows.map((r) => r.split(',').slice(0, 3).join(','))).toEqual(['"#","Source","Status"', '"1","one.jpg","done"', '"2","two.jpg","done"']);

    const noPhoto = await lenstack([join(ROOT, 'examples/analyze.ts'), join(work, 'missing.jpg')], {}, tsx);
    expect(noPhoto.code).not.toBe(0);
  });

  it('exits with codes scripts can trust: usage 2, auth 3, credits 4, API error 5, network 6', async () => {
    const noKey = await lenstack(['analyze', photo('Canon_40D.jpg')], { LENSTACK_API_KEY: undefined });
    expect(noKey.code).toBe(3);
    expect(noKey.stderr).toContain('set LENSTACK_API_KEY');

    const badKey = await lenstack(['usage', '--json'], { LENSTACK_API_KEY: 'svc_live_notakey00000000000000000000000000' });
    expect(badKey.code).toBe(3);
    expect(JSON.parse(badKey.stderr)).toMatchObject({ error: { code: 'AUTH_FAILED', status: 401 }, exitCode: 3 });

    const missing = await lenstack(['analyze', join(work, 'no-such-photo.jpg')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no-such-photo.jpg: no such file');
    expect((await lenstack(['analyze', photo('Canon_40D.jpg'), '--export', 'x.xlsx'])).code).toBe(2);
    expect((await lenstack(['frobnicate'])).code).toBe(2);
    // A misspelled lens or stack is a usage error found before any request: nothing is analysed.
    const requestsBefore = (await p.db.query('SELECT (SELECT count(*) FROM credit_ledger WHERE user_id = $1) + (SELECT count(*) FROM batches WHERE user_id = $1) AS n', [user.userId])).rows[0].n;
    const typo = await lenstack(['analyze', photo('Canon_40D.jpg'), '--lens', 'dating,locaton']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('unknown lens "locaton"; did you mean "location"?');
    const stackTypo = await lenstack(['batch', photo('Canon_40D.jpg'), '--stack', 'quickscan']);
    expect(stackTypo.code).toBe(2);
    expect(stackTypo.stderr).toContain('unknown stack "quickscan"; did you mean "quick-scan"?');
    expect((await p.db.query('SELECT (SELECT count(*) FROM credit_ledger WHERE user_id = $1) + (SELECT count(*) FROM batches WHERE user_id = $1) AS n', [user.userId])).rows[0].n).toBe(requestsBefore);

    const poor = await createTestAccount(p.db, { community: 1 });
    const broke = await lenstack(['analyze', photo('Canon_40D.jpg'), '--stack', 'full-analysis'], { LENSTACK_API_KEY: poor.liveKey });
    expect(broke.code).toBe(4);
    expect(broke.stderr).toContain('Needed 14 credits, 1 available');

    await writeFile(join(work, 'broken.jpg'), 'these bytes are not a photo');
    const invalid = await lenstack(['analyze', join(work, 'broken.jpg'), '--lens', 'dating', '--json']);
    expect(invalid.code).toBe(5);
    expect(invalid.stdout).toBe('');
    expect(JSON.parse(invalid.stderr)).toMatchObject({ error: { code: 'IMAGE_INVALID', status: 422, requestId: expect.any(String) }, exitCode: 5 });

    // Several photos: each is tried, the failure is reported in its place, the exit code is its.
    const mixed = await lenstack(['analyze', join(work, 'broken.jpg'), photo('Canon_40D.jpg'), '--lens', 'dating', '--json']);
    expect(mixed.code).toBe(5);
    const results = JSON.parse(mixed.stdout);
    expect(results.map((r: { file: string; error?: { code: string }; analysis?: { object: string } }) => [r.file, r.error?.code ?? r.analysis?.object])).toEqual([
      ['broken.jpg', 'IMAGE_INVALID'],
      ['Canon_40D.jpg', 'analysis'],
    ]);

    // A port nothing listens on: the OS refuses at once.
    const closed = await lenstack(['usage'], { LENSTACK_BASE_URL: 'http://127.0.0.1:9' });
    expect(closed.code).toBe(6);
    expect(closed.stderr).toContain('NETWORK_ERROR');
    expect((await stat(work)).isDirectory()).toBe(true);
  });
});

/**
 * A proxy to the API that passes everything but an export's body: of that it sends the headers and
 * the first half, then `cut` destroys the socket (a download that breaks off) or `stall` sends
 * nothing more (a download still waiting when the CLI is stopped). `halfSent` resolves at the first
 * such half; `halves()` counts them.
 */
async function startExportProxy(target: string, after: 'cut' | 'stall'): Promise<{ url: string; halfSent: Promise<void>; halves(): number; close(): Promise<void> }> {
  let halves = 0;
  let markHalfSent!: () => void;
  const halfSent = new Promise<void>((r) => (markHalfSent = r));
  const server = createServer((req, res) => {
    const upstream = httpRequest(new URL(req.url!, target), { method: req.method, headers: req.headers }, (answer) => {
      if (!/^\/v1\/batches\/[^/]+\/export/.test(req.url!)) {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
        return;
      }
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('end', () => {
        const body = Buffer.concat(chunks);
        const { 'transfer-encoding': _chunked, ...headers } = answer.headers;
        res.writeHead(answer.statusCode!, { ...headers, 'content-length': String(body.length) });
        res.write(body.subarray(0, body.length >> 1), () => {
          halves++;
          if (after === 'cut') res.socket?.destroy();
          markHalfSent();
        });
      });
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    halfSent,
    halves: () => halves,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/**
 * A tiny HTTP proxy between the CLI and the API that counts the bytes each tus PATCH carries to
 * the API, per upload id, and can hold one file's upload after half its bytes (named by the
 * `filename` in its Upload-Metadata) so a test can kill the CLI with a photo half sent.
 */
interface CountingProxy {
  url: string;
  patchBytes: Map<string, number>;
  /** upload id → the Upload-Offset of the first PATCH through this proxy (where a resume began). */
  firstOffset: Map<string, number>;
  /** upload id → file name, from each creation's Upload-Metadata and Location. */
  names: Map<string, string>;
  /** Resolves once the held file's PATCH reached half its bytes. */
  held: Promise<void>;
  /** Cuts the held PATCH off (both its connections, as a network would) and holds nothing more. */
  drop(): void;
  close(): Promise<void>;
}

async function startCountingProxy(target: string, hold?: string): Promise<CountingProxy> {
  const patchBytes = new Map<string, number>();
  const firstOffset = new Map<string, number>();
  const names = new Map<string, string>();
  const sizes = new Map<string, number>();
  let markHeld!: () => void;
  const held = new Promise<void>((r) => (markHeld = r));
  let cut: (() => void) | null = null;
  const server = createServer((req, res) => {
    const upstream = httpRequest(new URL(req.url!, target), { method: req.method, headers: req.headers }, (answer) => {
      if (req.method === 'POST' && req.url === '/v1/uploads' && answer.headers.location) {
        const id = answer.headers.location.split('/').pop()!;
        names.set(id, metadataName(req.headers['upload-metadata']));
        sizes.set(id, Number(req.headers['upload-length']));
      }
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    // The CLI went away (killed) before the answer: the API sees its request cut off, as it would.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    const id = req.method === 'PATCH' ? req.url!.split('/').pop()! : null;
    if (id && !firstOffset.has(id)) firstOffset.set(id, Number(req.headers['upload-offset']));
    req.on('data', (chunk: Buffer) => {
      if (id && hold !== undefined && names.get(id) === hold && (patchBytes.get(id) ?? 0) >= sizes.get(id)! / 2) {
        req.pause();
        cut = () => {
          upstream.destroy();
          req.socket.destroy();
        };
        markHeld();
        return;
      }
      if (id) patchBytes.set(id, (patchBytes.get(id) ?? 0) + chunk.length);
      upstream.write(chunk);
    });
    req.on('end', () => upstream.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    patchBytes,
    firstOffset,
    names,
    held,
    drop: () => {
      hold = undefined;
      cut?.();
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * A proxy for the fleet's uploads (one request per photo: the body in the POST under the id the
 * CLI chose): the body bytes each upload id received, every request in order, and optionally one
 * file's POST held after half its bytes, so a test can kill the CLI with it half sent.
 */
async function startFleetProxy(target: string, hold?: string): Promise<{ url: string; bodyBytes: Map<string, number>; headOffsets: Map<string, number>; headMissing: Set<string>; requests: Array<{ method: string; path: string; id: string | null }>; idOf(name: string): string | undefined; held: Promise<void>; close(): Promise<void> }> {
  const bodyBytes = new Map<string, number>();
  const headOffsets = new Map<string, number>();
  /** Upload ids a HEAD found missing (404): a creation cut off before the API made it. */
  const headMissing = new Set<string>();
  const names = new Map<string, string>();
  const requests: Array<{ method: string; path: string; id: string | null }> = [];
  let markHeld!: () => void;
  const held = new Promise<void>((r) => (markHeld = r));
  const server = createServer((req, res) => {
    const upstream = httpRequest(new URL(req.url!, target), { method: req.method, headers: req.headers }, (answer) => {
      if (req.method === 'HEAD' && id && answer.headers['upload-offset'] !== undefined) headOffsets.set(id, Number(answer.headers['upload-offset']));
      if (req.method === 'HEAD' && id && answer.statusCode === 404) headMissing.add(id);
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    const path = req.url!.split('?')[0]!;
    const id = req.method === 'POST' && path === '/v1/uploads' ? metadataValueOf(req.headers['upload-metadata'], 'uploadId') || null : path.startsWith('/v1/uploads/') ? path.split('/').pop()! : null;
    if (req.method === 'POST' && id) names.set(id, metadataName(req.headers['upload-metadata']));
    requests.push({ method: req.method!, path, id });
    const size = Number(req.headers['upload-length'] ?? 0);
    req.on('data', (chunk: Buffer) => {
      if (id && hold !== undefined && req.method === 'POST' && names.get(id) === hold && (bodyBytes.get(id) ?? 0) >= size / 2) {
        req.pause();
        markHeld();
        return;
      }
      if (id) bodyBytes.set(id, (bodyBytes.get(id) ?? 0) + chunk.length);
      upstream.write(chunk);
    });
    req.on('end', () => upstream.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodyBytes,
    headOffsets,
    headMissing,
    requests,
    idOf: (name) => [...names].find(([, n]) => n === name)?.[0],
    held,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function metadataValueOf(header: string | string[] | undefined, key: string): string {
  for (const pair of String(header ?? '').split(',')) {
    const [k, v] = pair.trim().split(' ');
    if (k === key && v) return Buffer.from(v, 'base64').toString('utf8');
  }
  return '';
}

function metadataName(header: string | string[] | undefined): string {
  for (const pair of String(header ?? '').split(',')) {
    const [k, v] = pair.trim().split(' ');
    if (k === 'filename' && v) return Buffer.from(v, 'base64').toString('utf8');
  }
  return '';
}

/** A 2-megapixel JPEG of noise (a few MB, camera-like entropy): big enough to be half sent. */
async function noisyJpeg(seed: number): Promise<Buffer> {
  const raw = Buffer.alloc(1600 * 1200 * 3);
  let x = seed;
  for (let i = 0; i < raw.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    raw[i] = x >>> 24;
  }
  return sharp(raw, { raw: { width: 1600, height: 1200, channels: 3 } }).jpeg({ quality: 92 }).toBuffer();
}

describe('lenstack batch: fleets over resumable uploads', () => {
  it('--vehicles with a manifest (BOM, CRLF, quoted fields): one batch of vehicles, a duplicate photo uploaded once, the export has VIN and mileage', async () => {
    const fleet = join(work, 'fleet');
    await mkdir(join(fleet, 'van 1', 'inside'), { recursive: true });
    await mkdir(join(fleet, 'van-2'));
    await copyFile(photo('gps-DSCN0010.jpg'), join(fleet, 'van 1', 'front.jpg'));
    await copyFile(photo('gps-DSCN0012.jpg'), join(fleet, 'van 1', 'inside', 'seats.jpg'));
    // The same photo in both vehicles: its bytes go up once, each vehicle names it.
    await copyFile(photo('xmp-no_exif.jpg'), join(fleet, 'van 1', 'shared.jpg'));
    await copyFile(photo('xmp-no_exif.jpg'), join(fleet, 'van-2', 'shared.jpg'));
    await copyFile(photo('orientation-portrait_8.jpg'), join(fleet, 'van-2', 'rear\nside.jpg'));
    await writeFile(
      join(fleet, 'vehicles.csv'),
      '\uFEFFFolder,VIN,Mileage,Make,Model,Year\r\n"van 1",wvwzzz1jz3w386752,84000,"Volkswagen, AG","Golf ""IV""",2003\r\nvan-2,1HGCM82633A004352,120500,Honda,Accord,2003\r\n',
    );
    const fleetAccount = await createTestAccount(p.db, { community: 20 });
    const csv = join(work, 'fleet.csv');

    const run = await lenstack(['batch', '--vehicles', fleet, '--export', csv, '--json'], { LENSTACK_API_KEY: fleetAccount.liveKey });
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout);
    expect(result.batch).toMatchObject({ kind: 'vehicles', status: 'completed', counts: { total: 2, done: 2, failed: 0 }, creditsCharged: 2 });
    expect(result.uploads).toMatchObject({ photos: 5, distinct: 4, uploaded: 4, resumed: 0, alreadyUploaded: 0 });
    expect(result.state).toBe(join(fleet, '.lenstack-batch.json'));
    const uploads = await p.db.query<{ sha256: string; n: number }>('SELECT sha256, count(*)::int AS n FROM uploads WHERE user_id = $1 GROUP BY sha256', [fleetAccount.userId]);
    expect(uploads.rows).toHaveLength(4);
    expect(uploads.rows.every((r) => r.n === 1)).toBe(true);
    expect(uploads.rows.map((r) => r.sha256)).toContain(sha256(photoBytes('xmp-no_exif.jpg')));

    const items = await p.db.query<{ source: string; photos: Array<{ source: string; ref: { sha256: string } }> }>('SELECT source, photos FROM batch_items WHERE batch_id = $1 ORDER BY index', [result.batch.id]);
    expect(items.rows.map((r) => [r.source, r.photos.map((ph) => ph.source)])).toEqual([
      ['van 1', ['front.jpg', join('inside', 'seats.jpg'), 'shared.jpg']],
      // The line break in a file name is not carried into names and exports.
      ['van-2', ['rear\uFFFDside.jpg', 'shared.jpg']],
    ]);
    expect(items.rows[1]!.photos[1]!.ref.sha256).toBe(sha256(photoBytes('xmp-no_exif.jpg')));
    expect(items.rows[0]!.photos[2]!.ref.sha256).toBe(sha256(photoBytes('xmp-no_exif.jpg')));

    const rows = parseCsv((await readFile(csv, 'utf8')).replace(/^\uFEFF/, ''), { columns: true }) as Array<Record<string, string>>;
    expect(rows.map((r) => [r.Source, r.Status, r.VIN, r.Mileage, r.Make, r.Model])).toEqual([
      ['van 1', 'done', 'WVWZZZ1JZ3W386752', '84000', 'Volkswagen, AG', 'Golf "IV"'],
      ['van-2', 'done', '1HGCM82633A004352', '120500', 'Honda', 'Accord'],
    ]);

    // The same command again: the state names the batch; it is shown, not paid for, nothing uploaded.
    const again = await lenstack(['batch', '--vehicles', fleet, '--json'], { LENSTACK_API_KEY: fleetAccount.liveKey });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).batch).toMatchObject({ id: result.batch.id, status: 'completed', creditsCharged: 2 });
    expect(again.stderr).toContain(`batch ${result.batch.id} was submitted by an earlier run`);
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [fleetAccount.userId])).rows[0].n).toBe(1);
    expect((await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [fleetAccount.userId])).rows[0].n).toBe(4);
    expect(await getBalance(p.db, fleetAccount.userId)).toMatchObject({ community: 18 });

    // Another account with the same folder: the state is not its; refused, nothing sent.
    const other = await createTestAccount(p.db, { community: 5 });
    const stranger = await lenstack(['batch', '--vehicles', fleet], { LENSTACK_API_KEY: other.liveKey });
    expect(stranger.code).toBe(2);
    expect(stranger.stderr).toContain('was written for another API key');
    expect((await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [other.userId])).rows[0].n).toBe(0);
  }, 60_000);

  it('killed (SIGKILL) with uploads done and one half sent, run again: the half-sent photo resumes from its offset, no byte goes twice, one batch, every result', async () => {
    const folder = join(work, 'resume');
    await mkdir(folder);
    const big = await noisyJpeg(7);
    await writeFile(join(folder, 'a-big.jpg'), big);
    const small = ['Canon_40D.jpg', 'Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0021.jpg', 'hdr-canon_hdr_YES.jpg', 'mobile-jolla.jpg', 'orientation-landscape_6.jpg'];
    for (const name of small) await copyFile(photo(name), join(folder, `b-${name}`));
    const resumeAccount = await createTestAccount(p.db, { community: 50 });
    const env = { LENSTACK_API_KEY: resumeAccount.liveKey };
    const finished = async () => (await p.db.query<{ n: number }>('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1 AND finished_at IS NOT NULL', [resumeAccount.userId])).rows[0]!.n;

    const first = await startCountingProxy(baseUrl, 'a-big.jpg');
    try {
      const child = spawn(process.execPath, [BIN, 'batch', folder, '--lens', 'dating', '--json'], {
        cwd: work,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LENSTACK_BASE_URL: first.url, ...env },
      });
      const exited = new Promise<string | null>((r) => child.on('exit', (_code, signal) => r(signal)));
      // Killed once the big photo is half sent and stored, and three others finished (read from the
      // API's rows and its upload file, not a timer). Bytes the proxy passed on that the API had not
      // yet written would be lost with the connection and rightly sent again: the wait makes the
      // half the API holds the half that was sent.
      await first.held;
      const bigAt = [...first.names].find(([, n]) => n === 'a-big.jpg')![0];
      const stored = join(`${p.config.BLOB_DIR}-uploads`, bigAt);
      while (((await stat(stored).catch(() => null))?.size ?? 0) < first.patchBytes.get(bigAt)!) await new Promise((r) => setImmediate(r));
      while ((await finished()) < 3) await new Promise((r) => setImmediate(r));
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    } finally {
      await first.close();
    }
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [resumeAccount.userId])).rows[0].n).toBe(0);
    const bigId = [...first.names].find(([, n]) => n === 'a-big.jpg')![0];
    expect(first.patchBytes.get(bigId)).toBeGreaterThanOrEqual(big.length / 2);
    expect(first.patchBytes.get(bigId)).toBeLessThan(big.length);

    // The same command again, through a proxy that holds nothing.
    const second = await startCountingProxy(baseUrl);
    let result;
    try {
      const run = await lenstack(['batch', folder, '--lens', 'dating', '--json'], { ...env, LENSTACK_BASE_URL: second.url });
      // On failure, the state file tells what the first run had recorded.
      expect(run.code, `${run.stderr}\n${await readFile(join(folder, '.lenstack-batch.json'), 'utf8')}`).toBe(0);
      result = JSON.parse(run.stdout);
    } finally {
      await second.close();
    }
    expect(result.batch).toMatchObject({ status: 'completed', counts: { total: 8, done: 8, failed: 0 }, creditsCharged: 8 });
    // The big photo and any whose URL was kept were continued; those recorded finished were not touched
    // (one may have finished at the API just before the kill: its HEAD says so, and it sends nothing).
    expect(result.uploads.resumed).toBeGreaterThanOrEqual(1);
    expect(result.uploads.alreadyUploaded + result.uploads.resumed).toBeGreaterThanOrEqual(4);
    // The half-sent photo was continued, not made again: the same upload id got its second half.
    expect(second.patchBytes.get(bigId)).toBe(big.length - first.patchBytes.get(bigId)!);
    expect([...second.names.values()]).not.toContain('a-big.jpg');
    // One finished upload per photo; over both runs each upload's PATCH bytes add up to its file's size
    // exactly. A creation the kill cut off before its answer reached the CLI leaves an empty upload
    // the CLI never learnt of: no byte was sent into it (it expires unused).
    const rows = await p.db.query<{ id: string; size: string; sha256: string | null }>('SELECT id, size::text, sha256 FROM uploads WHERE user_id = $1', [resumeAccount.userId]);
    const done = rows.rows.filter((r) => r.sha256 !== null);
    expect(done).toHaveLength(8);
    expect(new Set(done.map((r) => r.sha256)).size).toBe(8);
    expect(rows.rows.length - done.length).toBeLessThanOrEqual(4);
    // No byte the API held at the kill went again: each upload the second run continued went on
    // from the offset the API reported (its first PATCH's Upload-Offset) and sent exactly the rest.
    // Only bytes on the wire at the kill, which the API never stored, may go twice: a photo besides
    // the big one can be mid-PATCH then (the CLI sends a few at once; seen in CI under load).
    let resent = 0;
    for (const r of rows.rows) {
      const size = r.sha256 === null ? 0 : Number(r.size);
      const heldAtResume = second.firstOffset.get(r.id) ?? size;
      expect(second.patchBytes.get(r.id) ?? 0, r.id).toBe(size - heldAtResume);
      expect(first.patchBytes.get(r.id) ?? 0, r.id).toBeGreaterThanOrEqual(heldAtResume);
      resent += (first.patchBytes.get(r.id) ?? 0) - heldAtResume;
    }
    expect(resent).toBeLessThanOrEqual(4 * Math.max(...small.map((n) => photoBytes(n).length)));
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [resumeAccount.userId])).rows[0].n).toBe(1);
    const items = await p.db.query<{ source: string; sha256: string; status: string }>("SELECT source, ref->>'sha256' AS sha256, status FROM batch_items WHERE batch_id = $1 ORDER BY index", [result.batch.id]);
    expect(items.rows.map((r) => [r.source, r.status, r.sha256])).toEqual([
      ['a-big.jpg', 'done', sha256(big)],
      ...small.map((n) => [`b-${n}`, 'done', sha256(photoBytes(n))]),
    ]);
  }, 90_000);

  it('--vehicles with --manifest and --export: the batch is submitted before the photos go up, one request each; killed with one half sent, the same command again: it resumes from the offset, no photo goes twice, no second batch, the export read back', async () => {
    const fleet = join(work, 'fleet-resume');
    await mkdir(join(fleet, 'van-a'), { recursive: true });
    await mkdir(join(fleet, 'van-b'));
    const big = await noisyJpeg(11);
    await writeFile(join(fleet, 'van-a', 'a-big.jpg'), big);
    const small = ['Canon_40D.jpg', 'Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0021.jpg', 'orientation-landscape_6.jpg'];
    for (const [i, name] of small.entries()) await copyFile(photo(name), join(fleet, i < 2 ? 'van-a' : 'van-b', name));
    // The spreadsheet kept apart from the photos (--manifest), and the export the run writes at its end.
    const manifest = join(work, 'fleet-resume-manifest.csv');
    await writeFile(manifest, 'folder,VIN,mileage,make,model,year\nvan-a,WVWZZZ1JZ3W386752,84000,Volkswagen,Golf,2003\nvan-b,1HGCM82633A004352,120500,Honda,Accord,2003\n');
    const exported = join(work, 'fleet-resume.csv');
    const command = ['batch', '--vehicles', fleet, '--manifest', manifest, '--export', exported, '--json'];
    const fleetAccount = await createTestAccount(p.db, { community: 20 });
    const env = { LENSTACK_API_KEY: fleetAccount.liveKey };
    const uploadsOf = async () => (await p.db.query<{ id: string; size: string; sha256: string | null; finished_at: Date | null }>('SELECT id, size::text, sha256, finished_at FROM uploads WHERE user_id = $1', [fleetAccount.userId])).rows;
    const batchesOf = async () => (await p.db.query<{ id: string; created_at: Date }>('SELECT id, created_at FROM batches WHERE user_id = $1', [fleetAccount.userId])).rows;

    const first = await startFleetProxy(baseUrl, 'a-big.jpg');
    try {
      const child = spawn(process.execPath, [BIN, ...command], {
        cwd: work,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LENSTACK_BASE_URL: first.url, ...env },
      });
      const exited = new Promise<string | null>((r) => child.on('exit', (_code, signal) => r(signal)));
      // Killed once the big photo's POST is half sent and stored by the API (its upload file), and the
      // batch exists: it was submitted before any photo went up.
      await first.held;
      const bigId = first.idOf('a-big.jpg')!;
      const stored = join(`${p.config.BLOB_DIR}-uploads`, bigId);
      while (((await stat(stored).catch(() => null))?.size ?? 0) < first.bodyBytes.get(bigId)!) await new Promise((r) => setImmediate(r));
      while ((await batchesOf()).length === 0) await new Promise((r) => setImmediate(r));
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    } finally {
      await first.close();
    }
    const bigId = first.idOf('a-big.jpg')!;
    const [batch] = await batchesOf();
    expect(first.bodyBytes.get(bigId)).toBeGreaterThanOrEqual(big.length / 2);
    expect(first.bodyBytes.get(bigId)).toBeLessThan(big.length);
    // Every photo of the first run went in its POST: one request each.
    expect(first.requests.filter((r) => r.method === 'PATCH')).toEqual([]);

    const second = await startFleetProxy(baseUrl);
    let result;
    try {
      // Killed before its end, the first run wrote no export.
      expect(await stat(exported).catch(() => null)).toBeNull();
      const run = await lenstack(command, { ...env, LENSTACK_BASE_URL: second.url });
      expect(run.code, `${run.stderr}\n${await readFile(join(fleet, '.lenstack-batch.json'), 'utf8')}`).toBe(0);
      expect(run.stderr).toContain(`batch ${batch!.id} was submitted by an earlier run`);
      result = JSON.parse(run.stdout);
    } finally {
      await second.close();
    }
    // The same batch, run to its end; no second one was submitted.
    expect(result.batch).toMatchObject({ id: batch!.id, kind: 'vehicles', status: 'completed', counts: { total: 2, done: 2, failed: 0 }, creditsCharged: 2 });
    expect(await batchesOf()).toHaveLength(1);
    expect(second.requests.filter((r) => r.method === 'POST' && r.path === '/v1/batches')).toEqual([]);
    // The half-sent photo went on from the offset the API held (HEAD, then one PATCH of the rest), under the same id.
    expect(second.requests.filter((r) => r.id === bigId).map((r) => r.method)).toEqual(['HEAD', 'PATCH']);
    expect(second.bodyBytes.get(bigId)).toBe(big.length - first.bodyBytes.get(bigId)!);
    // One finished upload per photo. The second run sends of each photo exactly what the API lacked:
    // from the offset its HEAD answered, or all of it when the first run never began that photo.
    // (A small photo in flight when the first run was killed may have passed the proxy whole and not
    // reached the API's store, or its creation may not have been made at all, which the second
    // run's HEAD finds (404): its bytes are counted in the first run and rightly sent again, whole.)
    const rows = await uploadsOf();
    expect(rows).toHaveLength(6);
    expect(new Set(rows.map((r) => r.sha256))).toEqual(new Set([sha256(big), ...small.map((n) => sha256(photoBytes(n)))]));
    for (const r of rows) {
      const sent = [first.bodyBytes.get(r.id) ?? 0, second.bodyBytes.get(r.id) ?? 0] as const;
      const resumedAt = second.headOffsets.get(r.id);
      if (second.headMissing.has(r.id)) {
        expect(sent[1], r.id).toBe(Number(r.size));
        expect(sent[0], r.id).toBeLessThanOrEqual(Number(r.size));
      } else if (resumedAt === undefined) expect(sent[0] + sent[1], r.id).toBe(Number(r.size));
      else {
        expect(sent[1], r.id).toBe(Number(r.size) - resumedAt);
        // The first run sent each photo at most once: what the API held, and no more than the file.
        expect(sent[0], r.id).toBeGreaterThanOrEqual(resumedAt);
        expect(sent[0], r.id).toBeLessThanOrEqual(Number(r.size));
      }
    }
    // The analysis did not wait for the uploads: the batch existed before the first of them finished.
    expect(batch!.created_at.getTime()).toBeLessThan(Math.min(...rows.map((r) => r.finished_at!.getTime())));
    const items = await p.db.query<{ source: string; photos: Array<{ source: string; ref: { sha256: string } }> }>('SELECT source, photos FROM batch_items WHERE batch_id = $1 ORDER BY index', [batch!.id]);
    expect(items.rows.map((r) => [r.source, r.photos.map((ph) => ph.ref.sha256)])).toEqual([
      // In the order of their names (code points: capitals first).
      ['van-a', [sha256(photoBytes(small[0]!)), sha256(photoBytes(small[1]!)), sha256(big)]],
      ['van-b', small.slice(2).map((n) => sha256(photoBytes(n)))],
    ]);
    // The export the second run wrote, read back: each vehicle done, with its manifest's VIN and mileage.
    const rows2 = parseCsv((await readFile(exported, 'utf8')).replace(/^\uFEFF/, ''), { columns: true }) as Array<Record<string, string>>;
    expect(rows2.map((r) => [r.Source, r.Status, r.VIN, r.Mileage, r.Make, r.Model])).toEqual([
      ['van-a', 'done', 'WVWZZZ1JZ3W386752', '84000', 'Volkswagen', 'Golf'],
      ['van-b', 'done', '1HGCM82633A004352', '120500', 'Honda', 'Accord'],
    ]);
  }, 120_000);

  it('Ctrl-C while uploading exits 130 and the same command finishes; a connection cut mid-photo is retried from the offset the API holds', async () => {
    const folder = join(work, 'interrupted');
    await mkdir(folder);
    const big = await noisyJpeg(11);
    await writeFile(join(folder, 'a-big.jpg'), big);
    await copyFile(photo('orientation-landscape_1.jpg'), join(folder, 'b.jpg'));
    const ctrlAccount = await createTestAccount(p.db, { community: 10 });
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LENSTACK_API_KEY: ctrlAccount.liveKey };

    const first = await startCountingProxy(baseUrl, 'a-big.jpg');
    let stderr = '';
    try {
      const child = spawn(process.execPath, [BIN, 'batch', folder, '--lens', 'dating'], { cwd: work, env: { ...env, LENSTACK_BASE_URL: first.url } });
      child.stderr.on('data', (c) => (stderr += c));
      const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
      await first.held;
      child.kill('SIGINT');
      expect(await exited).toBe(130);
    } finally {
      await first.close();
    }
    expect(stderr).toContain(`interrupted; run the same command again to continue (state in ${join(folder, '.lenstack-batch.json')})`);
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [ctrlAccount.userId])).rows[0].n).toBe(0);

    const second = await startCountingProxy(baseUrl);
    try {
      const run = await lenstack(['batch', folder, '--lens', 'dating', '--json'], { LENSTACK_API_KEY: ctrlAccount.liveKey, LENSTACK_BASE_URL: second.url });
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout).batch).toMatchObject({ status: 'completed', counts: { total: 2, done: 2 } });
    } finally {
      await second.close();
    }
    const bigId = [...first.names].find(([, n]) => n === 'a-big.jpg')![0];
    // Continued from the offset the API held, not from zero; what the API held was not sent again.
    // Bytes the API had received but not stored when the interrupted PATCH ended (at most its
    // buffers) are sent again: the tus lock ends that request when the resume asks for the upload
    // (docs/decisions.md, "One writer per upload").
    const resumedAt = second.firstOffset.get(bigId)!;
    expect(resumedAt).toBeGreaterThan(0);
    expect(second.patchBytes.get(bigId)).toBe(big.length - resumedAt);
    expect(first.patchBytes.get(bigId)! - resumedAt).toBeLessThanOrEqual(512 * 1024);

    // A cut connection: the PATCH is cut off once the API has stored its first half; the CLI's
    // retry asks the offset and sends only the rest, in the same run.
    const cutFolder = join(work, 'cut');
    await mkdir(cutFolder);
    const other = await noisyJpeg(13);
    await writeFile(join(cutFolder, 'a-big.jpg'), other);
    const proxy = await startCountingProxy(baseUrl, 'a-big.jpg');
    try {
      const running = lenstack(['batch', cutFolder, '--lens', 'dating', '--json'], { LENSTACK_API_KEY: ctrlAccount.liveKey, LENSTACK_BASE_URL: proxy.url });
      await proxy.held;
      const id = [...proxy.names].find(([, n]) => n === 'a-big.jpg')![0];
      // The API's file store holds what it received; wait until it has all the proxy passed on.
      const stored = join(`${p.config.BLOB_DIR}-uploads`, id);
      while (((await stat(stored).catch(() => null))?.size ?? 0) < proxy.patchBytes.get(id)!) await new Promise((r) => setImmediate(r));
      const sentBeforeCut = proxy.patchBytes.get(id)!;
      proxy.drop();
      const run = await running;
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout).uploads).toMatchObject({ uploaded: 1, resumed: 0 });
      expect(sentBeforeCut).toBeLessThan(other.length);
      expect(proxy.patchBytes.get(id)).toBe(other.length);
      const rows = await p.db.query<{ sha256: string }>('SELECT sha256 FROM uploads WHERE user_id = $1 AND sha256 = $2', [ctrlAccount.userId, sha256(other)]);
      expect(rows.rows).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  }, 90_000);

  it('uploads that expired before the batch was submitted are sent again: found by the submission 404, or asked about first when old', async () => {
    const folder = join(work, 'expiring');
    await mkdir(folder);
    await copyFile(photo('gps-DSCN0012.jpg'), join(folder, 'a.jpg'));
    await copyFile(photo('hdr-canon_hdr_NO.jpg'), join(folder, 'b.jpg'));
    const expAccount = await createTestAccount(p.db, { community: 20 });
    const env = { LENSTACK_API_KEY: expAccount.liveKey };
    const shaA = sha256(photoBytes('gps-DSCN0012.jpg'));
    const shaB = sha256(photoBytes('hdr-canon_hdr_NO.jpg'));
    const first = await lenstack(['batch', folder, '--lens', 'dating', '--json'], env);
    expect(first.code, first.stderr).toBe(0);
    // The collector's mark, as after 24 h unused.
    const expire = (sha: string) => p.db.query('UPDATE uploads SET expired_at = now() WHERE user_id = $1 AND sha256 = $2 AND expired_at IS NULL', [expAccount.userId, sha]);
    const finishedRows = async (sha: string) => (await p.db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1 AND sha256 = $2 AND expired_at IS NULL', [expAccount.userId, sha])).rows[0].n;

    await expire(shaA);
    const second = await lenstack(['batch', folder, '--lens', 'describe', '--json'], env);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain('1 upload expired before the batch was submitted; uploading again');
    const r2 = JSON.parse(second.stdout);
    expect(r2.batch).toMatchObject({ status: 'completed', counts: { total: 2, done: 2 } });
    expect(r2.uploads).toMatchObject({ expired: 1, uploaded: 1 });
    expect(await finishedRows(shaA)).toBe(1);

    // An upload the state says finished over 12 h ago is asked about (HEAD) before submitting.
    await expire(shaB);
    const statePath = join(folder, '.lenstack-batch.json');
    const lines = (await readFile(statePath, 'utf8')).split('\n').map((l) => (l.includes('"uploaded"') && l.includes(shaB) ? l.replace(/"at":\d+/, '"at":0') : l));
    await writeFile(statePath, lines.join('\n'));
    const third = await lenstack(['batch', folder, '--lens', 'location'], env);
    expect(third.code, third.stderr).toBe(0);
    expect(third.stderr).not.toContain('expired before the batch was submitted');
    expect(third.stderr).toMatch(/uploaded 1 of 2 distinct photos \(\d+ KiB sent; 1 were uploaded before\)/);
    expect(await finishedRows(shaB)).toBe(1);
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [expAccount.userId])).rows[0].n).toBe(3);
  }, 90_000);
});
