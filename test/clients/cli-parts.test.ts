import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { appendFile, mkdir, mkdtemp, readFile, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LenstackError } from '@lenstack/client';
import { CliError, EXIT, exitCodeOf } from '../../clients/cli/src/exit-codes.ts';
import { ACCEPTED_FORMATS } from '../../images/probe.ts';
import { collectPhotos, hashFile, PHOTO_EXTENSIONS } from '../../clients/cli/src/files.ts';
import { itemName, photoPlanKey, vehiclePlanKey } from '../../clients/cli/src/commands/batch.ts';
import { BatchState } from '../../clients/cli/src/batch-state.ts';
import { defaultOutput } from '../../clients/cli/src/commands/enrich.ts';
import { main } from '../../clients/cli/src/main.ts';
import { checkNames, nearest } from '../../clients/cli/src/names.ts';
import { LENS_NAMES, STACK_NAMES } from '@lenstack/client';
import { PHOTOS_DIR } from '../helpers/photos.ts';
import { Progress, progressLine } from '../../clients/cli/src/progress.ts';
import { formatCell, readPath } from '../../clients/cli/src/render.ts';

/** The CLI's pure parts; the whole CLI runs end to end in cli.test.ts. */
const apiError = (status: number | null, code: string) =>
  new LenstackError({ code: code as never, message: code, status, requestId: 'req_1', retryable: false, attempts: 1 });

/**
 * The tus half of a stub API for the batch wire tests below: creation answers a Location, an
 * append takes the body and answers its length as the offset (what a tus 1.0 server says).
 */
function tusStub(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): boolean {
  if (!req.url!.startsWith('/v1/uploads')) return false;
  if (req.method === 'POST') {
    res.writeHead(201, { 'tus-resumable': '1.0.0', location: `/v1/uploads/upl_${'0'.repeat(31)}${(tusStub.n++ % 10)}` });
    res.end();
    return true;
  }
  let n = 0;
  req.on('data', (c: Buffer) => (n += c.length));
  req.on('end', () => {
    res.writeHead(204, { 'tus-resumable': '1.0.0', 'upload-offset': String(n) });
    res.end();
  });
  return true;
}
tusStub.n = 0;

describe('lenstack CLI parts', () => {
  it('maps failures to exit codes: auth 3, credits 4, other API errors 5, network 6, usage 2, its own faults 1', () => {
    expect(exitCodeOf(apiError(401, 'AUTH_FAILED'))).toBe(EXIT.AUTH);
    expect(exitCodeOf(apiError(402, 'PLAN_LIMIT_EXCEEDED'))).toBe(EXIT.CREDITS);
    expect(exitCodeOf(apiError(422, 'IMAGE_INVALID'))).toBe(EXIT.API);
    expect(exitCodeOf(apiError(429, 'RATE_LIMITED'))).toBe(EXIT.API);
    expect(exitCodeOf(apiError(null, 'NETWORK_ERROR'))).toBe(EXIT.NETWORK);
    expect(exitCodeOf(new CliError('bad flag', EXIT.USAGE))).toBe(2);
    expect(exitCodeOf(new TypeError('a bug'))).toBe(EXIT.INTERNAL);
  });

  it('reads catalog column paths: fields, `*` over arrays, numeric indexes', () => {
    const analysis = { output: { estimatedDate: { year: 1978 }, colors: [{ hex: '#112233' }, { hex: '#445566' }], objects: [{ name: 'car' }, { name: 'tree' }] } };
    expect(readPath(analysis, 'output.estimatedDate.year')).toBe(1978);
    expect(readPath(analysis, 'output.colors.*.hex')).toEqual(['#112233', '#445566']);
    expect(readPath(analysis, 'output.objects.1.name')).toBe('tree');
    expect(readPath(analysis, 'output.missing.field')).toBeUndefined();
    expect(formatCell(0.724, 'percentage')).toBe('72%');
    expect(formatCell(['a', 'b'], 'tags')).toBe('a, b');
    expect(formatCell(null, 'string')).toBe('');
  });

  it('draws the progress bar only on a terminal', () => {
    expect(progressLine('batch', 3, 12, 'about 9s left', 80)).toBe(`batch [${'#'.repeat(10)}${'-'.repeat(30)}] 3/12  about 9s left`);
    const written: string[] = [];
    const stream = (isTTY: boolean) => ({ isTTY, columns: 80, write: (s: string) => written.push(s) }) as unknown as NodeJS.WriteStream;
    const piped = new Progress(stream(false), 'batch');
    piped.update(1, 2);
    piped.finish();
    expect(written).toEqual([]);
    const tty = new Progress(stream(true), 'batch');
    tty.update(1, 2);
    tty.update(1, 2);
    tty.finish();
    expect(written).toEqual([`\r\x1b[2K${progressLine('batch', 1, 2, '', 80)}`, '\r\x1b[2K']);
  });

  it('collects a folder’s photos in name order, sub-folders included, hidden and non-image files left out', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-collect-'));
    try {
      await mkdir(join(dir, 'b'));
      await mkdir(join(dir, '.thumbs'));
      for (const f of ['z.JPG', 'a.png', 'b/c.heic', 'notes.txt', '.hidden.jpg', '.thumbs/t.jpg']) await writeFile(join(dir, f), 'x');
      expect((await collectPhotos([dir])).map((p) => p.name)).toEqual(['a.png', join('b', 'c.heic'), 'z.JPG']);
      await expect(collectPhotos([join(dir, 'nope')])).rejects.toMatchObject({ exitCode: EXIT.USAGE });
      await expect(collectPhotos([join(dir, 'b', '..', '.thumbs', '..', 'b', 'c.heic')])).resolves.toHaveLength(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('takes symlinked photos in a folder (deduplicated by where they point), not symlinked folders', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-links-'));
    try {
      await mkdir(join(dir, 'album'));
      await mkdir(join(dir, 'elsewhere'));
      await writeFile(join(dir, 'elsewhere', 'real.jpg'), 'x');
      await writeFile(join(dir, 'elsewhere', 'other.jpg'), 'y');
      await writeFile(join(dir, 'album', 'own.jpg'), 'z');
      await symlink(join(dir, 'elsewhere', 'real.jpg'), join(dir, 'album', 'link.jpg'));
      await symlink(join(dir, 'elsewhere', 'real.jpg'), join(dir, 'album', 'link-again.jpg'));
      await symlink(join(dir, 'elsewhere'), join(dir, 'album', 'linked-folder'));
      await symlink(join(dir, 'nowhere.jpg'), join(dir, 'album', 'dangling.jpg'));
      const found = await collectPhotos([join(dir, 'album')]);
      expect(found.map((p) => p.name)).toEqual(['link-again.jpg', 'own.jpg']);
      expect(found.map((p) => p.size)).toEqual([1, 1]);
      // The same photo named twice on the command line is one item.
      expect(await collectPhotos([join(dir, 'album', 'own.jpg'), join(dir, 'album', 'own.jpg')])).toHaveLength(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('hashes a large folder with few files open at once (no EMFILE under a low descriptor limit)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-many-'));
    try {
      for (let i = 0; i < 400; i++) await writeFile(join(dir, `p${String(i).padStart(3, '0')}.jpg`), `photo ${i}`);
      // Sparse: 80 MiB that the old one-request batch refused; hashed in a stream now.
      await writeFile(join(dir, 'zz-big.jpg'), '');
      await truncate(join(dir, 'zz-big.jpg'), 80 * 1024 * 1024);
      const script = `const f = await import(${JSON.stringify(new URL('../../clients/cli/src/files.ts', import.meta.url).href)});
        const photos = await f.collectPhotos([${JSON.stringify(dir)}]);
        const hashes = await f.mapLimit(photos, 4, (p) => f.hashFile(p.path));
        console.log(photos.length, hashes[399], hashes[400], process.memoryUsage().rss < 300 * 1024 * 1024);`;
      const r = spawnSync('sh', ['-c', `ulimit -n 128 && exec "${process.execPath}" --import tsx --input-type=module -e '${script.replace(/'/g, `'\\''`)}'`], { encoding: 'utf8' });
      expect(r.stderr).toBe('');
      const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
      expect(r.stdout.trim()).toBe(`401 ${sha(Buffer.from('photo 399'))} ${sha(Buffer.alloc(80 * 1024 * 1024))} true`);
      expect(await hashFile(join(dir, 'p000.jpg'))).toBe(sha(Buffer.from('photo 0')));
      await expect(hashFile(join(dir, 'gone.jpg'))).rejects.toMatchObject({ exitCode: EXIT.USAGE });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keys a batch plan by the same bytes as the one JSON string it was (a state written before still resumes)', () => {
    const sha = (s: string) => createHash('sha256').update(s).digest('hex');
    const vehicles = [
      { folder: 'van 1', vehicle: { vin: 'WVWZZZ1JZXW000001', mileage: 12 }, photos: [{ name: 'a.jpg', sha256: 'a'.repeat(64) }, { name: 'sub/Ü "quoted".jpg', sha256: 'b'.repeat(64) }] },
      { folder: 'van 2', vehicle: {}, photos: [{ name: 'c.jpg', sha256: 'c'.repeat(64) }] },
    ];
    expect(vehiclePlanKey(vehicles)).toBe(sha(JSON.stringify({ vehicles: vehicles.map((v) => [v.folder, v.vehicle, v.photos.map((p) => [p.name, p.sha256])]) })));
    const photos = vehicles[0]!.photos;
    for (const options of [{}, { modules: ['dating'] }, { preset: 'full-analysis' }, { modules: ['dating', 'describe'], preset: 'full-analysis' }]) {
      expect(photoPlanKey(photos, options)).toBe(sha(JSON.stringify({ items: photos.map((p) => [p.name, p.sha256]), ...options })));
    }
    expect(vehiclePlanKey(vehicles)).not.toBe(vehiclePlanKey([vehicles[1]!, vehicles[0]!]));
  });

  it('keeps the batch state as a journal: each event appends one line and what was written stays; read back a chunk at a time', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-state-'));
    try {
      const path = join(dir, 'state.json');
      const state = BatchState.open(path, { key: 'k1' });
      expect(await readFile(path, 'utf8')).toBe('{"lenstack":"batch-state","version":1,"key":"k1"}\n');
      const inode = (await stat(path)).ino;
      // Past several of the reader's 64 KiB chunks, with multi-byte characters across their bounds.
      const message = 'kein Bild: é€😀 '.repeat(20);
      for (let i = 0; i < 1500; i++) {
        const sha256 = createHash('sha256').update(String(i)).digest('hex');
        const before = i % 500 === 0 ? await readFile(path) : null;
        state.record({ upload: { sha256, id: `upl_${i}` } });
        if (i % 3 === 0) state.record({ refused: { sha256, code: 'IMAGE_INVALID', message } });
        else state.record({ uploaded: { sha256, uploadId: `upl_${i}`, at: i } });
        if (before) {
          const after = await readFile(path);
          expect(after.subarray(0, before.length).equals(before)).toBe(true);
          expect(after.subarray(before.length).toString().split('\n').filter(Boolean).map((l) => Object.keys(JSON.parse(l))[0])).toEqual(['upload', i % 3 === 0 ? 'refused' : 'uploaded']);
        }
      }
      state.record({ hash: { path: '/photos/a.jpg', size: 1, mtimeMs: 2.5, sha256: 'f'.repeat(64) } });
      state.record({ submit: { plan: 'p1', requestId: 'cli_1' } });
      // Killed mid-write: a torn last line.
      await appendFile(path, '{"batch":{"plan":"p1","id":"bat_');
      expect((await stat(path)).size).toBeGreaterThan(4 * 64 * 1024);
      expect((await stat(path)).ino).toBe(inode);

      const again = BatchState.open(path, { key: 'k1' });
      expect(again.uploaded.size).toBe(1000);
      expect(again.refused.size).toBe(500);
      expect(again.begun.size).toBe(1500);
      expect(again.refused.get(createHash('sha256').update('3').digest('hex'))).toEqual({ code: 'IMAGE_INVALID', message });
      expect(again.uploadedAt.get(createHash('sha256').update('1499').digest('hex'))).toBe(1499);
      expect(again.hashes.get('/photos/a.jpg')).toEqual({ path: '/photos/a.jpg', size: 1, mtimeMs: 2.5, sha256: 'f'.repeat(64) });
      expect(again.submits.get('p1')).toBe('cli_1');
      expect(again.batches.size).toBe(0);
      // The torn line is ended, so the next event starts a line of its own.
      again.record({ batch: { plan: 'p1', id: 'bat_2' } });
      expect(BatchState.open(path, { key: 'k1' }).batches.get('p1')).toBe('bat_2');
      again.forgetHashes();
      expect(again.hashes.size).toBe(0);

      expect(() => BatchState.open(path, { key: 'k2' })).toThrow(/written for another API key/);
      await writeFile(join(dir, 'photo.jpg'), Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x0a]));
      expect(() => BatchState.open(join(dir, 'photo.jpg'), { key: 'k1' })).toThrow(/is not a lenstack batch state file/);
      expect(() => BatchState.open(dir, { key: 'k1' })).toThrow(/cannot read the state file/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('names batch items without line breaks or control characters, within the API bound, keeping the end', () => {
    expect(itemName('day1/a.jpg')).toBe('day1/a.jpg');
    expect(itemName('evil\nname\r\u202e.jpg')).toBe('evil\uFFFDname\uFFFD\uFFFD.jpg');
    const long = itemName(`${'d/'.repeat(300)}last.jpg`);
    expect(long).toHaveLength(500);
    expect(long.startsWith('…')).toBe(true);
    expect(long.endsWith('/last.jpg')).toBe(true);
  });

  it('looks for the extensions of every format the API accepts', () => {
    // A new format in images/probe.ts fails here until the CLI looks for its files.
    expect(ACCEPTED_FORMATS).toBe('JPEG, PNG, WebP, GIF (first frame), TIFF (first page), AVIF, HEIC/HEIF or BMP');
    for (const name of ['a.jpg', 'a.JPEG', 'a.png', 'a.webp', 'a.gif', 'a.tif', 'a.tiff', 'a.avif', 'a.heic', 'a.HEIF', 'a.bmp']) expect(PHOTO_EXTENSIONS.test(name), name).toBe(true);
    for (const name of ['a.txt', 'a.jpg.xmp', 'a.pdf']) expect(PHOTO_EXTENSIONS.test(name), name).toBe(false);
  });

  it('names the enriched copy beside the original', () => {
    expect(defaultOutput('/photos/IMG_1.jpeg')).toBe('/photos/IMG_1.enriched.jpeg');
    expect(defaultOutput('scan')).toBe('scan.enriched.jpg');
  });

  it('batch: a batch the API cannot follow to its end exits non-zero, naming the batch (it runs on)', async () => {
    const running = { object: 'batch', id: 'bat_wire', status: 'running', pauseReason: null, counts: { total: 1, done: 0, failed: 0, pending: 1 }, etaSeconds: null };
    const seen: string[] = [];
    // The API's event stream ends cleanly each time (what it does when its read of the batch throws).
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (tusStub(req, res)) return;
      req.resume();
      if (req.method === 'POST') {
        res.writeHead(202, { 'content-type': 'application/json' });
        return res.end(JSON.stringify(running));
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`event: batch\ndata: ${JSON.stringify(running)}\n\n`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const out: string[] = [];
      const err: string[] = [];
      const stream = (into: string[], isTTY: boolean) => ({ isTTY, columns: 80, write: (s: string) => into.push(s) }) as unknown as NodeJS.WriteStream;
      const waits: number[] = [];
      const code = await main(
        ['batch', join(PHOTOS_DIR, 'Canon_40D.jpg'), '--json', '--state', join(await mkdtemp(join(tmpdir(), 'lenstack-state-')), 'state.json')],
        { apiKey: 'svc_live_wire', baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
        // stderr a terminal: the progress bar is drawn, and must be cleared before the error.
        { stdout: stream(out, false), stderr: stream(err, true) },
        { sleep: async (ms) => void waits.push(ms) },
      );
      expect(code).toBe(EXIT.NETWORK);
      expect(out).toEqual([]);
      // Hashed and uploaded (each bar drawn and cleared), then submitted.
      expect(err[0]).toMatch(/^\r\x1b\[2Khashing \[#+\] 1\/1/);
      const at = err.indexOf('batch bat_wire submitted (1 photo)\n');
      expect(err.slice(0, at).join('')).toMatch(/\r\x1b\[2Kupload \[#+\] 1\/1  8 KiB of 8 KiB/);
      expect(err[at + 1]).toMatch(/^\r\x1b\[2Kbatch \[-+\] 0\/1/);
      expect(err.at(-2)).toBe('\r\x1b[2K');
      expect(JSON.parse(err.at(-1)!)).toMatchObject({ error: { code: 'NETWORK_ERROR', message: expect.stringContaining('still running') }, batchId: 'bat_wire', exitCode: 6 });
      expect(seen).toEqual(['POST /v1/uploads', expect.stringMatching(/^PATCH \/v1\/uploads\/upl_/), 'POST /v1/batches', ...Array(3).fill('GET /v1/batches/bat_wire/events')]);
      expect(waits).toHaveLength(2);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('batch: a cancelled batch exits 5, though nothing failed', async () => {
    const batch = { object: 'batch', id: 'bat_cancel', status: 'running', pauseReason: null, creditsCharged: 0, counts: { total: 2, done: 0, failed: 0, pending: 2 }, etaSeconds: null };
    const cancelled = { ...batch, status: 'cancelled' };
    const server = createServer((req, res) => {
      if (tusStub(req, res)) return;
      req.resume();
      const [status, type, body] =
        req.method === 'POST' ? [202, 'application/json', JSON.stringify(batch)] :
        req.url!.endsWith('/events') ? [200, 'text/event-stream', `event: batch\ndata: ${JSON.stringify(cancelled)}\n\n`] :
        req.url!.includes('/items') ? [200, 'application/json', JSON.stringify({ object: 'list', items: [], nextAfter: null })] :
        [200, 'application/json', JSON.stringify(cancelled)];
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const out: string[] = [];
      const err: string[] = [];
      const stream = (into: string[]) => ({ isTTY: false, write: (s: string) => into.push(s) }) as unknown as NodeJS.WriteStream;
      const state = join(await mkdtemp(join(tmpdir(), 'lenstack-state-')), 'state.json');
      const code = await main(['batch', join(PHOTOS_DIR, 'Canon_40D.jpg'), join(PHOTOS_DIR, 'Nikon_D70.jpg'), '--state', state], { apiKey: 'svc_live_wire', baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }, { stdout: stream(out), stderr: stream(err) });
      expect(code).toBe(EXIT.API);
      expect(out.join('')).toBe('batch bat_cancel cancelled: 0 done, 0 failed, 2 pending; 0 credits\n');
      expect(err.join('')).toContain('batch bat_cancel was cancelled: 2 photos were not analyzed.');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe('lens and stack names, checked before sending', () => {
  it('suggests the nearest valid name for a typo, and none for another word', () => {
    expect(nearest('datng', LENS_NAMES)).toBe('dating');
    expect(nearest('Colour-palette', LENS_NAMES)).toBe('color-palette');
    expect(nearest('full-analysys', STACK_NAMES)).toBe('full-analysis');
    expect(nearest('weather', LENS_NAMES)).toBeNull();
  });

  it('accepts every name the API document lists, refuses the rest with exit 2, and the internal lens too', () => {
    expect(() => checkNames([...LENS_NAMES], STACK_NAMES[0])).not.toThrow();
    const refused = (() => {
      try {
        checkNames(['vehicle-condition'], undefined);
      } catch (err) {
        return err;
      }
    })();
    expect(refused).toBeInstanceOf(CliError);
    expect(exitCodeOf(refused)).toBe(EXIT.USAGE);
    expect(String((refused as Error).message)).toContain('unknown lens "vehicle-condition"');
    expect(() => checkNames([], 'nope')).toThrow(/unknown stack "nope" \(lenstack catalog lists them\)/);
  });
});
