import { PassThrough } from 'node:stream';
import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import { describe, expect, it } from 'vitest';
import { exportJsonItem, IDENTITY_COLUMNS, neutralise, writeCsv, writeJson, writeXlsx, type ExportRow } from '../../exports/table.ts';
import { defaultColumnsFor } from '../../lenses/columns.ts';
import { sandboxOutput } from '../../lenses/fixtures.ts';
import type { Column } from '../../lenses/types.ts';

const collect = async (run: (out: PassThrough) => Promise<void>): Promise<Buffer> => {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  await run(out);
  return Buffer.concat(chunks);
};

async function* rowsOf(rows: ExportRow[]): AsyncIterable<ExportRow> {
  yield* rows;
}

const output = { ...sandboxOutput(['moderation', 'dating']), reportId: 'vrp_internal', caption: '=HYPERLINK("http://evil.example","click")' };
const ROWS: ExportRow[] = [
  { index: 0, source: 'https://photos.example/a.jpg', status: 'done', sha256: 'a'.repeat(64), error: null, result: { output } },
  { index: 1, source: '=cmd|"/c calc"!A1', status: 'failed', sha256: null, error: '-IMAGE_INVALID: not a photo', result: null },
  { index: 2, source: '@upload.jpg', status: 'pending', sha256: null, error: null, result: null },
];
const COLUMNS: Column[] = [
  ...defaultColumnsFor(['dating']),
  { label: 'Caption', jsonPath: 'output.caption', format: 'string' },
  { label: '+Flags', jsonPath: 'output.moderation.flaggedCategories', format: 'tags' },
  { label: 'Missing', jsonPath: 'output.nothing.here', format: 'number' },
];

const HEADER = [...IDENTITY_COLUMNS, ...COLUMNS.map((c) => (c.label.startsWith('+') ? `'${c.label}` : c.label))];
const col = (label: string) => HEADER.indexOf(label);

describe('formula cells are neutralised', () => {
  it.each(['=1+1', '+1', '-1', '@SUM(A1)', ' =x', '\u00a0+x', '＝1'])('%j gets a leading apostrophe', (text) => {
    expect(neutralise(text)).toBe(`'${text}`);
  });
  it.each(['plain', '1978', "'already", 'a-b=c', 'two\nlines'])('%j stays as it is', (text) => {
    expect(neutralise(text)).toBe(text);
  });
  it.each([
    ['a\n=1+1', "a\n'=1+1"],
    ['a\r=1+1', "a\n'=1+1"],
    ['a\r\n@x', "a\n'@x"],
    ['a\u2028-x', "a\n'-x"],
    ['\rx', "'\nx"],
    ['\tx', ' x'],
    ['\t=x', "' =x"],
    ['x\u0000\u001b\u007f\u0085y', 'x    y'],
  ])('%j: line breaks become LF, other control characters spaces, every line checked → %j', (text, want) => {
    expect(neutralise(text)).toBe(want);
  });
});

describe('csv export', () => {
  it('identity columns first, chosen columns by label, values typed, formulas neutralised, read back by a CSV parser', async () => {
    const bytes = await collect((out) => writeCsv(rowsOf(ROWS), COLUMNS, out));
    expect(bytes.subarray(0, 3).equals(Buffer.from([0xef, 0xbb, 0xbf]))).toBe(true);
    const records = parse(bytes, { bom: true }) as string[][];
    expect(records[0]).toEqual(HEADER);
    expect(records).toHaveLength(4);
    const [, done, failed, pending] = records as [string[], string[], string[], string[]];
    expect(done.slice(0, 5)).toEqual(['1', 'https://photos.example/a.jpg', 'done', 'a'.repeat(64), '']);
    expect(done.slice(5, 10)).toEqual(['1978', '1978', '1975', '1981', '72%']);
    expect(done[col('Caption')]).toBe(`'${output.caption}`);
    expect(done[col('Missing')]).toBe('');
    expect(failed.slice(0, 5)).toEqual(['2', `'=cmd|"/c calc"!A1`, 'failed', '', "'-IMAGE_INVALID: not a photo"]);
    expect(pending.slice(0, 3)).toEqual(['3', "'@upload.jpg", 'pending']);
    // No cell of the file starts a formula.
    for (const cell of records.flat()) expect(cell).not.toMatch(/^[=+\-@\t\r]/);
  });
});

describe('xlsx export', () => {
  it('read back with exceljs: header, numbers as numbers, percentages formatted, text neutralised', async () => {
    const bytes = await collect((out) => writeXlsx(rowsOf(ROWS), COLUMNS, out));
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.load(bytes as unknown as ArrayBuffer);
    const sheet = wb.getWorksheet('Photos')!;
    expect(sheet.rowCount).toBe(4);
    const header = (sheet.getRow(1).values as unknown[]).slice(1);
    expect(header).toEqual(HEADER);
    const done = sheet.getRow(2);
    expect(done.getCell(1).value).toBe(1);
    expect(done.getCell(7).value).toBe(1978);
    expect(done.getCell(10).value).toBe(0.72);
    expect(done.getCell(10).numFmt).toBe('0.0%');
    expect(done.getCell(col('Caption') + 1).value).toBe(`'${output.caption}`);
    expect(sheet.getRow(3).getCell(2).value).toBe(`'=cmd|"/c calc"!A1`);
    // Nothing in the workbook is a formula cell.
    sheet.eachRow((row) => row.eachCell((cell) => expect(cell.type).not.toBe(ExcelJS.ValueType.Formula)));
  });
});

describe('json export', () => {
  it('keeps identity and lens outputs, strips moderation details and internal ids', async () => {
    const bytes = await collect((out) => writeJson(rowsOf(ROWS), out));
    const items = JSON.parse(bytes.toString('utf8')) as Array<Record<string, unknown>>;
    expect(items).toHaveLength(3);
    expect(items[0]).toMatchObject({ index: 0, source: 'https://photos.example/a.jpg', status: 'done', sha256: 'a'.repeat(64) });
    const out0 = items[0]!.output as Record<string, unknown>;
    expect(out0).toHaveProperty('estimatedDate');
    expect(out0).not.toHaveProperty('moderation');
    expect(out0).not.toHaveProperty('reportId');
    expect(items[1]).toEqual({ index: 1, source: ROWS[1]!.source, status: 'failed', sha256: null, error: ROWS[1]!.error, output: null });
    expect(exportJsonItem(ROWS[0]!)).not.toHaveProperty('result');
  });

  it('an empty batch is an empty array', async () => {
    expect(JSON.parse((await collect((out) => writeJson(rowsOf([]), out))).toString())).toEqual([]);
  });
});

describe('a reader that goes away', () => {
  /**
   * Back-pressure shown, not assumed: the output's buffer is past its high-water mark (a write
   * returned false) and the writer has a 'drain' listener on it, i.e. it is waiting on the reader.
   */
  const writerWaiting = (out: PassThrough) =>
    expect.poll(() => ({ needDrain: out.writableNeedDrain, waitingOnDrain: out.listenerCount('drain') > 0 }), { timeout: 10_000, interval: 5 }).toEqual({ needDrain: true, waitingOnDrain: true });
  // Many rows, produced slowly enough that the output fills and the writer waits on it.
  async function* many(): AsyncIterable<ExportRow> {
    for (let i = 0; i < 5_000; i++) yield { ...ROWS[0]!, index: i };
  }
  it.each([
    ['csv', (out: PassThrough) => writeCsv(many(), COLUMNS, out)],
    ['json', (out: PassThrough) => writeJson(many(), out)],
    ['xlsx', (out: PassThrough) => writeXlsx(many(), COLUMNS, out)],
  ] as const)('%s: the writer stops with an error instead of waiting forever or crashing the process', async (_f, run) => {
    // Nobody reads: the output fills up; then the client disconnects (destroyed, no error).
    const closed = new PassThrough({ highWaterMark: 1024 });
    const pending = run(closed);
    await writerWaiting(closed);
    closed.destroy();
    await expect(pending).rejects.toThrow(/closed before it finished/);

    // An output that fails outright.
    const failing = new PassThrough({ highWaterMark: 1024 });
    const second = run(failing);
    await writerWaiting(failing);
    failing.destroy(new Error('socket hang up'));
    await expect(second).rejects.toThrow(/socket hang up|closed before it finished/);
  });
});
