import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LenstackError } from '@lenstack/client';
import { CliError, EXIT, exitCodeOf } from '../../clients/cli/src/exit-codes.ts';
import { collectPhotos } from '../../clients/cli/src/files.ts';
import { defaultOutput } from '../../clients/cli/src/commands/enrich.ts';
import { Progress, progressLine } from '../../clients/cli/src/progress.ts';
import { formatCell, readPath } from '../../clients/cli/src/render.ts';

/** The CLI's pure parts; the whole CLI runs end to end in cli.test.ts. */
const apiError = (status: number | null, code: string) =>
  new LenstackError({ code: code as never, message: code, status, requestId: 'req_1', retryable: false, attempts: 1 });

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

  it('names the enriched copy beside the original', () => {
    expect(defaultOutput('/photos/IMG_1.jpeg')).toBe('/photos/IMG_1.enriched.jpeg');
    expect(defaultOutput('scan')).toBe('scan.enriched.jpg');
  });
});
