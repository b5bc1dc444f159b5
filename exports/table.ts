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
 * A spreadsheet runs a cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return as a
 * formula (CSV injection): such text gets a leading apostrophe, which spreadsheets show as text.
 * Applied to every text cell, identity columns included (a URL is caller-controlled).
 */
export function neutralise(text: string): string {
  // Fullwidth ＝＋－＠ too: some spreadsheets fold them to the ASCII operators.
  return /^[=+\-@\t\r\n\uFF1D\uFF0B\uFF0D\uFF20]/.test(text) ? `'${text}` : text;
}

type Cell = string | number | Date | null;

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

const identity = (row: ExportRow): Cell[] => [row.index + 1, neutralise(row.source), row.status, row.sha256, row.error === null ? null : neutralise(row.error)];

/** CSV (RFC 4180, UTF-8 with a BOM so spreadsheets pick the encoding) through csv-stringify. */
export async function writeCsv(rows: AsyncIterable<ExportRow>, columns: readonly Column[], out: Writable): Promise<void> {
  const csv = stringify({ bom: true, record_delimiter: 'windows', cast: { date: (d) => d.toISOString(), number: (n) => String(n) } });
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
  for await (const row of rows) {
    await write([...identity(row), ...columns.map((c) => percentText(c, cellValue(c, row.result)))]);
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
  for await (const row of rows) {
    w.check();
    sheet.addRow([...identity(row), ...columns.map((c) => cellValue(c, row.result))]).commit();
    // exceljs writes without waiting: wait here when a slow reader has the output full.
    if (out.writableNeedDrain) await w.drained();
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
  for await (const row of rows) {
    await write(`${first ? '' : ','}\n${JSON.stringify(exportJsonItem(row))}`);
    first = false;
  }
  out.end(first ? ']\n' : '\n]\n');
  await w.done;
}
