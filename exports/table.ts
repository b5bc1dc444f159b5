import type { Writable } from 'node:stream';
import { stringify } from 'csv-stringify';
import ExcelJS from 'exceljs';
import { resolveJsonPath } from '../lenses/columns.ts';
import { getLens, outputFields } from '../lenses/index.ts';
import type { Column } from '../lenses/types.ts';

/**
 * Batch exports as tables: one row per analyzed photo, the columns chosen at submit time (or the
 * lenses' default columns), written as a stream so 10,000 rows never sit in memory at once.
 * Identity columns come first: the photo's position in the batch, where it came from, its outcome
 * and its SHA-256 (the key a lookup by fingerprint takes).
 */
export interface ExportRow {
  /** 0-based position in the batch. */
  index: number;
  /** The URL it was fetched from, or the uploaded file's name. */
  source: string;
  status: 'done' | 'failed' | 'pending';
  sha256: string | null;
  /** Why it failed, for failed rows. */
  error: string | null;
  /** The analysis result a column's jsonPath points into (`output.…`). */
  result: Record<string, unknown> | null;
}

export const IDENTITY_COLUMNS = ['#', 'Source', 'Status', 'SHA-256', 'Error'] as const;

/**
 * One rule for every text cell, identity columns, headers and lens outputs alike (a file name, a
 * URL, a VIN or a model's caption are all caller- or vendor-controlled), so that no spreadsheet
 * reads a formula out of the export (CSV injection):
 * - line breaks (CRLF, a bare CR, U+2028/U+2029) become one LF: the only control character a cell
 *   keeps, inside a quoted field; every other control character (TAB, VT, ESC, DEL, C1 …) becomes
 *   a space (an xlsx cannot hold most of them anyway);
 * - a cell that starts with a line break, and any line of a cell whose first non-blank character is
 *   `=`, `+`, `-` or `@` (or their fullwidth forms, which some spreadsheets fold to ASCII), gets a
 *   leading apostrophe, which spreadsheets show as text (OWASP's advice). A line after a break is
 *   checked too: an importer that splits rows on any line break would otherwise start a row there.
 * Numbers are written as numbers and never pass through here, so a negative number is not touched.
 */
export function neutralise(text: string): string {
  const flat = text.replace(/\r\n|[\r\u2028\u2029]/g, '\n').replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, ' ');
  const lines = flat.split('\n').map((line) => (FORMULA_START.test(line) ? `'${line}` : line));
  const out = lines.join('\n');
  return out.startsWith('\n') ? `'${out}` : out;
}
const FORMULA_START = /^[ \u00a0]*[=+\-@\uFF1D\uFF0B\uFF0D\uFF20]/;

type Cell = string | number | Date | null;

/**
 * How long a writer runs before it gives the event loop a turn. Rows arrive 500 to a database page
 * and each is written without waiting, so without a turn now and then a 10,000-row xlsx holds the
 * process for a whole page at a time: health checks and other requests wait behind it. Four at once
 * delayed the event loop by up to 1.5 s before, 0.3-0.4 s with 10 ms slices (docs/reliability.md).
 */
const SLICE_MS = 10;
/** A writer's pace: `await pace()` after each row yields once the slice is used up. */
function pacer(): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < SLICE_MS) return;
    await nextTurn();
    since = performance.now();
  };
}
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The output's fate as one promise, handled from the start (an error while rows are still being
 * read must not become an unhandled rejection), plus a wait for `drain` that also ends when the
 * output fails or is closed early (a client that went away): the writer stops reading rows then.
 */
function watch(out: Writable, extra?: NodeJS.EventEmitter) {
  let failure: Error | null = null;
  const done = new Promise<void>((resolve, reject) => {
    out.once('finish', resolve);
    out.once('error', (err) => reject((failure = err)));
    out.once('close', () => (out.writableFinished ? resolve() : reject((failure ??= new Error('the export stream was closed before it finished')))));
    extra?.once('error', (err: Error) => reject((failure = err)));
  });
  done.catch(() => {});
  const drained = () =>
    new Promise<void>((resolve, reject) => {
      if (failure) return reject(failure);
      const ok = () => (cleanup(), resolve());
      const bad = () => (cleanup(), reject(failure ?? new Error('the export stream was closed before it finished')));
      const cleanup = () => {
        out.off('drain', ok);
        out.off('close', bad);
        out.off('error', bad);
      };
      out.once('drain', ok);
      out.once('close', bad);
      out.once('error', bad);
    });
  const check = () => {
    if (failure) throw failure;
    if (out.destroyed) throw new Error('the export stream was closed before it finished');
  };
  return { done, drained, check };
}

/** One cell's value for a column: typed for xlsx (numbers stay numbers), text neutralised. */
export function cellValue(column: Column, result: Record<string, unknown> | null): Cell {
  if (!result) return null;
  const raw = resolveJsonPath(result, column.jsonPath);
  if (raw === undefined || raw === null) return null;
  switch (column.format) {
    case 'number':
    case 'percentage':
      if (typeof raw === 'number' && Number.isFinite(raw)) return raw;
      break;
    case 'date':
      if (typeof raw === 'string' && /^\d{4}-\d{2}-\d{2}/.test(raw) && !Number.isNaN(Date.parse(raw))) return new Date(raw);
      break;
    case 'tags':
      if (Array.isArray(raw)) return neutralise(raw.map((v) => (typeof v === 'object' ? JSON.stringify(v) : String(v))).join(', '));
      break;
  }
  if (typeof raw === 'number' || typeof raw === 'boolean') return typeof raw === 'number' ? raw : String(raw);
  return neutralise(typeof raw === 'string' ? raw : JSON.stringify(raw));
}

const text = (value: string | null): string | null => (value === null ? null : neutralise(value));
const identity = (row: ExportRow): Cell[] => [row.index + 1, neutralise(row.source), neutralise(row.status), text(row.sha256), text(row.error)];

/**
 * CSV (RFC 4180, UTF-8 with a BOM so spreadsheets pick the encoding) through csv-stringify, every
 * field quoted: csv-stringify quotes on its own only fields holding a comma, a quote or the record
 * delimiter (CRLF), which left a bare LF or CR, or a `;` (the list separator of many locales),
 * outside quotes.
 */
export async function writeCsv(rows: AsyncIterable<ExportRow>, columns: readonly Column[], out: Writable): Promise<void> {
  const csv = stringify({ bom: true, record_delimiter: 'windows', quoted: true, quoted_empty: true, cast: { date: (d) => d.toISOString(), number: (n) => String(n) } });
  const w = watch(out, csv);
  csv.pipe(out);
  const write = async (record: Cell[]) => {
    w.check();
    if (!csv.write(record.map((c) => (c === null ? '' : c)))) {
      await new Promise<void>((resolve, reject) => {
        csv.once('drain', resolve);
        w.done.catch(reject);
      });
    }
  };
  await write([...IDENTITY_COLUMNS, ...columns.map((c) => neutralise(c.label))]);
  const pace = pacer();
  for await (const row of rows) {
    await write([...identity(row), ...columns.map((c) => percentText(c, cellValue(c, row.result)))]);
    await pace();
  }
  csv.end();
  await w.done;
}

/** In CSV a percentage reads as one: 0.42 → "42%"; xlsx keeps the number and formats the cell. */
function percentText(column: Column, value: Cell): Cell {
  return column.format === 'percentage' && typeof value === 'number' ? `${Math.round(value * 1000) / 10}%` : value;
}

/** xlsx through exceljs's streaming writer: each row is committed (written out and dropped) as it goes. */
export async function writeXlsx(rows: AsyncIterable<ExportRow>, columns: readonly Column[], out: Writable): Promise<void> {
  const workbook = new ExcelJS.stream.xlsx.WorkbookWriter({ stream: out, useStyles: true, useSharedStrings: false });
  const sheet = workbook.addWorksheet('Photos', { views: [{ state: 'frozen', ySplit: 1 }] });
  sheet.columns = [
    { header: '#', width: 6 },
    { header: 'Source', width: 40 },
    { header: 'Status', width: 10 },
    { header: 'SHA-256', width: 20 },
    { header: 'Error', width: 30 },
    ...columns.map((c) => ({
      header: neutralise(c.label),
      width: Math.min(40, Math.max(12, c.label.length + 2)),
      ...(c.format === 'percentage' ? { style: { numFmt: '0.0%' } } : c.format === 'date' ? { style: { numFmt: 'yyyy-mm-dd hh:mm' } } : {}),
    })),
  ];
  sheet.getRow(1).font = { bold: true };
  sheet.getRow(1).commit();
  const w = watch(out);
  const pace = pacer();
  for await (const row of rows) {
    w.check();
    sheet.addRow([...identity(row), ...columns.map((c) => cellValue(c, row.result))]).commit();
    // exceljs writes without waiting: wait here when a slow reader has the output full.
    if (out.writableNeedDrain) await w.drained();
    await pace();
  }
  sheet.commit();
  // The zip is finished asynchronously; an output that fails or closes first ends the wait.
  await Promise.all([workbook.commit(), w.done]);
}

/** Fields of an analysis output that a JSON export leaves out: moderation details and internal ids. */
const MODERATION_FIELDS = new Set(outputFields(getLens('moderation')));
const INTERNAL_FIELDS = new Set(['reportId', 'workflowId', 'reservationId', 'blobPath', 'path']);

/**
 * What a JSON export says of one photo: its identity and the lens outputs, without storage paths,
 * internal identifiers (analysis, report, workflow, reservation ids) or moderation details.
 */
export function exportJsonItem(row: ExportRow): Record<string, unknown> {
  const output = (row.result?.output ?? null) as Record<string, unknown> | null;
  const kept = output === null ? null : Object.fromEntries(Object.entries(output).filter(([k]) => !MODERATION_FIELDS.has(k) && !INTERNAL_FIELDS.has(k)));
  return { index: row.index, source: row.source, status: row.status, sha256: row.sha256, error: row.error, output: kept };
}

/** A JSON array written item by item. */
export async function writeJson(rows: AsyncIterable<ExportRow>, out: Writable): Promise<void> {
  const w = watch(out);
  const write = async (text: string) => {
    w.check();
    if (!out.write(text)) await w.drained();
  };
  await write('[');
  let first = true;
  const pace = pacer();
  for await (const row of rows) {
    await write(`${first ? '' : ','}\n${JSON.stringify(exportJsonItem(row))}`);
    first = false;
    await pace();
  }
  out.end(first ? ']\n' : '\n]\n');
  await w.done;
}
