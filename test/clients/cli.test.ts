import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ExcelJS from 'exceljs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { createMetadataTool, type MetadataTool } from '../../enrich/exiftool.ts';
import { createTestUser, type TestUser } from '../helpers/app.ts';
import { PHOTOS_DIR, photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startCanaryAndPublic, type Canary, type PublicServer } from '../images/servers.ts';

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
let user: TestUser;
let work: string;
let tool: MetadataTool;
let canary: Canary;
let server: PublicServer;

beforeAll(async () => {
  ({ canary, server } = await startCanaryAndPublic(photoBytes('mobile-jolla.jpg')));
  const fetchPolicy = { ...PUBLIC_INTERNET, allowAddress: (ip: string) => ip === '127.0.0.2' || isPublicAddress(ip), timeoutMs: 3000 };
  p = await startPipeline({ fetchPolicy, deps: { fetchPolicy } });
  baseUrl = await p.app.listen({ port: 0, host: '127.0.0.1' });
  user = await createTestUser(p.db, { community: 100 });
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

function lenstack(args: string[], env: Record<string, string | undefined> = {}, command = [process.execPath, BIN]): Promise<Run> {
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  const merged = { LENSTACK_API_KEY: user.liveKey, LENSTACK_BASE_URL: baseUrl, ...env };
  for (const [k, v] of Object.entries(merged)) if (v !== undefined) childEnv[k] = v;
  return new Promise((resolve) => {
    execFile(command[0]!, [...command.slice(1), ...args], { cwd: work, env: childEnv, maxBuffer: 64 * 1024 * 1024, timeout: 25_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}
const photo = (name: string) => join(PHOTOS_DIR, name);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('lenstack CLI', () => {
  it('npx lenstack --help works from the repository (the package.json bin)', async () => {
    const run = await lenstack(['--help'], {}, ['npx', '--no-install', '--prefix', ROOT, 'lenstack']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('lenstack analyze <photo|url>...');
    expect(run.stdout).toMatch(/4 not enough credits/);
  });

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
    expect(typeof analysis.output.estimatedDate.year).toBe('number');

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
    const poor = await createTestUser(p.db, { community: 1 });
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

  it('batch exits 4 when the batch pauses for credits and 5 when photos failed; says the batch id at once', async () => {
    const poor = await createTestUser(p.db, { community: 1 });
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

    const mixed = join(work, 'mixed');
    await mkdir(mixed);
    await copyFile(photo('xmp-no_exif.jpg'), join(mixed, 'good.jpg'));
    await writeFile(join(mixed, 'bad.jpg'), 'not a photo at all');
    const failed = await lenstack(['batch', mixed, '--lens', 'dating']);
    expect(failed.code, failed.stderr).toBe(5);
    expect(failed.stdout).toMatch(/^batch (bat_\S+) completed: 1 done, 1 failed, 0 pending; 1 credits$/m);
    expect(failed.stdout).toMatch(/bad\.jpg\s+IMAGE_INVALID/);
    const id = failed.stdout.match(/^batch (bat_\S+)/m)![1]!;
    expect(failed.stderr).toContain(`batch ${id} submitted`);
  });

  it('batch refuses photos too big for one request, and an --export that exists, before submitting', async () => {
    const folder = join(work, 'huge');
    await mkdir(folder);
    for (const f of ['a.jpg', 'b.jpg']) {
      await writeFile(join(folder, f), '');
      await truncate(join(folder, f), 40 * 1024 * 1024);
    }
    // This workspace's batches only: other test files share the database and make batches of their own.
    const before = await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId]);
    const huge = await lenstack(['batch', folder, '--lens', 'dating']);
    expect(huge.code).toBe(2);
    expect(huge.stderr).toMatch(/2 photos, 80\.0 MiB \(106\.7 MiB as base64\), do not fit in one request: the API takes at most 100\.0 MiB/);
    expect(huge.stderr).toContain('resumable uploads');

    const existing = join(work, 'existing.csv');
    await writeFile(existing, 'keep me');
    const exists = await lenstack(['batch', photo('Canon_40D.jpg'), '--lens', 'dating', '--export', existing]);
    expect(exists.code).toBe(2);
    expect(exists.stderr).toContain(`${existing} exists; pass --force`);
    expect(await readFile(existing, 'utf8')).toBe('keep me');
    expect((await p.db.query('SELECT count(*)::int AS n FROM batches WHERE user_id = $1', [user.userId])).rows[0].n).toBe(before.rows[0].n);

    const forced = await lenstack(['batch', photo('Canon_40D.jpg'), '--lens', 'dating', '--export', existing, '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(await readFile(existing, 'utf8')).toMatch(/^\uFEFF?"#","Source","Status"/);
  });

  it('draws the progress bar on a terminal (a real pty from script(1)) and clears it', async () => {
    const command = [process.execPath, BIN, 'batch', photo('Canon_40D.jpg'), '--lens', 'dating'].map((a) => `'${a}'`).join(' ');
    const run = await new Promise<Run>((resolve) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: work, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LENSTACK_API_KEY: user.liveKey, LENSTACK_BASE_URL: baseUrl, COLUMNS: '80' } });
      let out = '';
      child.stdout.on('data', (c) => (out += c));
      child.on('close', (code) => resolve({ code: code ?? -1, stdout: out, stderr: '' }));
    });
    expect(run.code, run.stdout).toBe(0);
    expect(run.stdout).toMatch(/\r\x1b\[2Kbatch \[[#-]+\] \d\/1/);
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

    const poor = await createTestUser(p.db, { community: 1 });
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
