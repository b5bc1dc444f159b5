import { parse } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { DISTINCT_PHOTOS, photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Formula injection through a batch export (issue 21, item 1), over real HTTP against the real
 * pipeline: photo names, a vehicle's VIN and lens outputs that carry a formula after a line break,
 * after a bare CR, behind a `;`, or at the start. The file is read back by a CSV parser and by
 * exceljs, cell by cell, and the CSV also line by line as a naive importer would split it.
 */
let p: Pipeline;
let base: string;
beforeAll(async () => {
  p = await startPipeline();
  await p.startWorker();
  base = await p.app.listen({ port: 0, host: '127.0.0.1' });
}, 120_000);
afterAll(async () => p?.close());

const CALC = "=cmd|' /C calc'!A0";
const NAMES = [
  'IMG_0001.jpg\n=1+1',
  `IMG_0002.jpg\r${CALC}`,
  'IMG_0003.jpg\r\n+SUM(A1:A9)',
  'holiday;=HYPERLINK("http://evil.example";"x").jpg',
  '@SUM(1+1)*cmd|"/c calc"!A1',
  '\t=1+1.jpg',
  'IMG_0007.jpg\u000b=2+2\u0007\u001b[31m',
];
/** Lens outputs as a vendor steered by text in a photo could return them. */
const HOSTILE_OUTPUT = { caption: `A car\n${CALC}`, note: '-2+3;=4', title: '\r@x', tags: ['ok', '\n=1+1', '+1'] };

const FORMULA_START = /^[=+\-@\t\r\uFF1D\uFF0B\uFF0D\uFF20]/;
/** Control characters other than LF (the one line break a cell keeps). */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/;

function expectNoFormula(cell: string, where: string) {
  // A number written as text (CSV) is read as the number it is, a negative one included.
  if (/^-?\d+(\.\d+)?%?$/.test(cell)) return;
  expect(cell, where).not.toMatch(CONTROL);
  for (const line of cell.split('\n')) expect(line, `${where}: a line of the cell`).not.toMatch(FORMULA_START);
}

async function exportOf(key: string, id: string, format: 'csv' | 'xlsx'): Promise<Buffer> {
  const res = await fetch(`${base}/v1/batches/${id}/export?format=${format}`, { headers: bearer(key) });
  expect(res.status, await res.clone().text().catch(() => '')).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

function checkCsv(bytes: Buffer, rows: number): string[][] {
  const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
  // Every field quoted, every record ended by CRLF: nothing is left for a reader to guess.
  expect(text).toMatch(/^(?:"(?:[^"]|"")*"(?:,|\r\n))+$/);
  // Split as a naive importer would (any line break ends a row): no row starts a formula.
  for (const line of text.split(/\r\n|\r|\n/)) expect(line, 'a physical line of the file').not.toMatch(/^[=+\-@\t]/);
  const records = parse(text) as string[][];
  expect(records).toHaveLength(rows + 1);
  for (const [r, record] of records.entries()) for (const [c, cell] of record.entries()) expectNoFormula(cell, `csv row ${r + 1} col ${c + 1}`);
  return records;
}

async function checkXlsx(bytes: Buffer, rows: number): Promise<ExcelJS.Worksheet> {
  const wb = new ExcelJS.Workbook();
  await wb.xlsx.load(bytes as unknown as ArrayBuffer);
  const sheet = wb.getWorksheet('Photos')!;
  expect(sheet.rowCount).toBe(rows + 1);
  sheet.eachRow((row, r) =>
    row.eachCell((cell, c) => {
      expect(cell.type, `xlsx row ${r} col ${c}`).not.toBe(ExcelJS.ValueType.Formula);
      expect(cell.type, `xlsx row ${r} col ${c}`).not.toBe(ExcelJS.ValueType.Hyperlink);
      if (typeof cell.value === 'string') expectNoFormula(cell.value, `xlsx row ${r} col ${c}`);
    }),
  );
  return sheet;
}

describe('a batch export carries no formula, whatever the names and outputs hold', () => {
  it('photo names with a formula after LF, CR or CRLF, behind a ; or at the start: every field quoted, each read back as text', async () => {
    const user = await createTestAccount(p.db, { community: 100 });
    const items = NAMES.map((name, k) => ({ base64: photoBase64(DISTINCT_PHOTOS[k]!), name }));
    items.push({ base64: Buffer.from('not a photo at all').toString('base64'), name: `broken.jpg\n${CALC}` });
    const columns = [
      { label: 'Year', jsonPath: 'output.estimatedDate.year', format: 'number' },
      { label: '=Caption\n+x', jsonPath: 'output.caption', format: 'string' },
      { label: 'Note', jsonPath: 'output.note', format: 'string' },
      { label: 'Title', jsonPath: 'output.title', format: 'string' },
      { label: 'Tags', jsonPath: 'output.tags', format: 'tags' },
    ];
    const res = await fetch(`${base}/v1/batches`, { method: 'POST', headers: { ...bearer(user.liveKey), 'content-type': 'application/json' }, body: JSON.stringify({ items, modules: ['dating'], columns }) });
    expect(res.status).toBe(202);
    const batch = (await res.json()) as { id: string };
    await expect.poll(async () => ((await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: bearer(user.liveKey) })).json()) as { status: string }).status, { timeout: 90_000, interval: 250 }).toBe('completed');
    // The dating outputs of this account's photos get hostile text, as a steered vendor would write it.
    const planted = await p.db.query(`UPDATE lens_records SET output = output || $2::jsonb WHERE user_id = $1 AND lens = 'dating'`, [user.userId, JSON.stringify(HOSTILE_OUTPUT)]);
    expect(planted.rowCount).toBe(NAMES.length);

    const records = checkCsv(await exportOf(user.liveKey, batch.id, 'csv'), items.length);
    expect(records[0]!.slice(5)).toEqual(['Year', "'=Caption\n'+x", 'Note', 'Title', 'Tags']);
    expect(records.slice(1).map((r) => r[1])).toEqual([
      "IMG_0001.jpg\n'=1+1",
      `IMG_0002.jpg\n'${CALC}`,
      "IMG_0003.jpg\n'+SUM(A1:A9)",
      'holiday;=HYPERLINK("http://evil.example";"x").jpg',
      `'@SUM(1+1)*cmd|"/c calc"!A1`,
      "' =1+1.jpg",
      'IMG_0007.jpg =2+2  [31m',
      `broken.jpg\n'${CALC}`,
    ]);
    const done = records[1]!;
    expect(done[2]).toBe('done');
    expect(done[6]).toBe(`A car\n'${CALC}`);
    expect(done[7]).toBe("'-2+3;=4");
    expect(done[8]).toBe("'\n'@x");
    expect(done[9]).toBe("ok, \n'=1+1, +1");
    expect(records[8]![2]).toBe('failed');

    const sheet = await checkXlsx(await exportOf(user.liveKey, batch.id, 'xlsx'), items.length);
    expect(sheet.getRow(2).getCell(2).value).toBe("IMG_0001.jpg\n'=1+1");
    expect(sheet.getRow(3).getCell(2).value).toBe(`IMG_0002.jpg\n'${CALC}`);
    expect(sheet.getRow(2).getCell(7).value).toBe(`A car\n'${CALC}`);
    expect(typeof sheet.getRow(2).getCell(6).value).toBe('number');
  }, 180_000);

  it('a vehicle batch: the VIN that names the row, and the make, model and VIN of the report', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const vin = '\n=1+1;@A1\r-2';
    const res = await fetch(`${base}/v1/batches`, {
      method: 'POST',
      headers: { ...bearer(user.liveKey), 'content-type': 'application/json' },
      body: JSON.stringify({ vehicles: [{ vehicle: { vin, make: '=Volkswagen', model: '+Golf' }, items: [{ base64: photoBase64('Canon_40D.jpg'), name: '-front.jpg' }] }] }),
    });
    expect(res.status).toBe(202);
    const batch = (await res.json()) as { id: string };
    await expect.poll(async () => ((await (await fetch(`${base}/v1/batches/${batch.id}`, { headers: bearer(user.liveKey) })).json()) as { status: string }).status, { timeout: 90_000, interval: 250 }).toBe('completed');
    const planted = await p.db.query(
      `UPDATE vehicle_reports SET output = jsonb_set(jsonb_set(jsonb_set(output, '{vehicleContext,make}', to_jsonb($2::text)), '{vehicleContext,model}', to_jsonb($3::text)), '{vehicleContext,vin}', to_jsonb($4::text)) WHERE user_id = $1`,
      [user.userId, '=Volkswagen', 'Golf\r+cmd', vin],
    );
    expect(planted.rowCount).toBe(1);

    const records = checkCsv(await exportOf(user.liveKey, batch.id, 'csv'), 1);
    const makeModelVin = (row: string[]) => [row[5], row[6], row[8]];
    expect(makeModelVin(records[0]!)).toEqual(['Make', 'Model', 'VIN']);
    expect(records[1]!.slice(0, 3)).toEqual(['1', "'\n'=1+1;@A1\n'-2", 'done']);
    expect(makeModelVin(records[1]!)).toEqual(["'=Volkswagen", "Golf\n'+cmd", "'\n'=1+1;@A1\n'-2"]);
    const sheet = await checkXlsx(await exportOf(user.liveKey, batch.id, 'xlsx'), 1);
    expect(sheet.getRow(2).getCell(6).value).toBe("'=Volkswagen");
    expect(sheet.getRow(2).getCell(9).value).toBe("'\n'=1+1;@A1\n'-2");
  }, 180_000);
});
