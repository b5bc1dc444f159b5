import { PassThrough, type Writable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { validationFailed } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import { writeCsv, writeJson, writeXlsx, type ExportRow } from '../exports/table.ts';
import { defaultColumnsFor } from '../lenses/columns.ts';
import type { LensName } from '../lenses/types.ts';
import { batchItems, getBatch, type BatchItemRow } from './repository.ts';

export const EXPORT_FORMATS = ['xlsx', 'csv', 'json'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  csv: 'text/csv; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

export function exportFormat(value: unknown): ExportFormat {
  if (typeof value === 'string' && (EXPORT_FORMATS as readonly string[]).includes(value)) return value as ExportFormat;
  throw validationFailed(`format: must be one of ${EXPORT_FORMATS.join(', ')}${value === undefined ? '' : `, got ${JSON.stringify(String(value).slice(0, 50))}`}`);
}

const toRow = (item: BatchItemRow): ExportRow => ({
  index: item.index,
  source: item.source,
  status: item.status,
  sha256: item.sha256,
  error: item.error === null ? null : `${item.errorCode}: ${item.error}`,
  result: item.output ? { output: item.output } : null,
});

/**
 * The batch's export, checked first (404 for another account's batch, 400 for an unknown format)
 * so that the caller gets a clean error before any byte is written; then `write` streams it.
 */
export async function prepareBatchExport(db: Db, userId: string, batchId: string, format: unknown): Promise<{ format: ExportFormat; write(out: Writable): Promise<void> }> {
  const f = exportFormat(format);
  const batch = await getBatch(db, userId, batchId);
  // A vehicle batch's rows are reports: the report lens's columns, not every lens of the stack.
  const columns = batch.columns ?? defaultColumnsFor(batch.kind === 'vehicles' ? ['vehicle-condition'] : (batch.spec.lenses as LensName[]));
  async function* rows(): AsyncIterable<ExportRow> {
    for await (const item of batchItems(db, { userId, batchId, lenses: batch.spec.lenses })) yield toRow(item);
  }
  return {
    format: f,
    write: (out) => (f === 'xlsx' ? writeXlsx(rows(), columns, out) : f === 'csv' ? writeCsv(rows(), columns, out) : writeJson(rows(), out)),
  };
}

/**
 * Answer with a prepared export, streamed: the API's Bearer route and the console's session route
 * both send it this way. A failure after the first byte can only cut the stream (the status is
 * gone by then); it is logged.
 */
export function sendBatchExport(request: FastifyRequest, reply: FastifyReply, batchId: string, exp: { format: ExportFormat; write(out: Writable): Promise<void> }) {
  const body = new PassThrough();
  exp.write(body).catch((err: unknown) => {
    request.log.error({ err }, 'batch export failed mid-stream');
    body.destroy(err as Error);
  });
  return reply
    .type(EXPORT_CONTENT_TYPES[exp.format])
    .header('content-disposition', `attachment; filename="${batchId.replace(/[^A-Za-z0-9_-]/g, '')}.${exp.format}"`)
    .header('cache-control', 'no-store')
    .send(body);
}
