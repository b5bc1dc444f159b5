import { PassThrough, type Writable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../core/config.ts';
import { validationFailed } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import { writeCsv, writeJson, writeXlsx, type ExportRow } from '../exports/table.ts';
import { defaultColumnsFor } from '../lenses/columns.ts';
import type { LensName } from '../lenses/types.ts';
import { batchItems, getBatch, type BatchItemRow } from './repository.ts';
import { Slots, slotsFull } from './slots.ts';

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
 * Exports running at once on one process: an export reads every row of a batch and builds a
 * 10,000-row spreadsheet, so a few at once per account (429 beyond) and in all (503 beyond), each
 * refusal with Retry-After. The API and the console each hold one.
 */
export class ExportSlots {
  private readonly slots = new Slots();
  constructor(private readonly limits: Pick<Config, 'EXPORTS_PER_ACCOUNT' | 'EXPORTS_IN_FLIGHT'>) {}

  take(accountId: string): () => void {
    const slot = this.slots.take([
      { key: `account:${accountId}`, max: this.limits.EXPORTS_PER_ACCOUNT },
      { key: 'process', max: this.limits.EXPORTS_IN_FLIGHT },
    ]);
    if ('full' in slot) {
      throw slot.full === 'process'
        ? slotsFull('SERVICE_UNAVAILABLE', `This server is writing ${this.limits.EXPORTS_IN_FLIGHT} exports already; try again shortly`)
        : slotsFull('RATE_LIMITED', `At most ${this.limits.EXPORTS_PER_ACCOUNT} exports at once per account; wait for one to finish`);
    }
    return slot.release;
  }
}

export interface PreparedExport {
  format: ExportFormat;
  write(out: Writable): Promise<void>;
  /** Gives the export's slot back: called once the writing ended, however it ended. */
  release(): void;
}

/**
 * The batch's export, checked first (404 for another account's batch, 400 for an unknown format,
 * 429/503 when too many exports run) so that the caller gets a clean error before any byte is
 * written; then `write` streams it.
 */
export async function prepareBatchExport(db: Db, accountId: string, batchId: string, format: unknown, slots: ExportSlots): Promise<PreparedExport> {
  const f = exportFormat(format);
  const batch = await getBatch(db, accountId, batchId);
  // A vehicle batch's rows are reports: the report lens's columns, not every lens of the stack.
  const columns = batch.columns ?? defaultColumnsFor(batch.kind === 'vehicles' ? ['vehicle-condition'] : (batch.spec.lenses as LensName[]));
  // The slot is taken last: nothing after it can throw, so a failed preparation holds no slot
  // (one taken before a throw would stay taken for the life of the process).
  const release = slots.take(accountId);
  async function* rows(): AsyncIterable<ExportRow> {
    for await (const item of batchItems(db, { accountId, batchId, lenses: batch.spec.lenses })) yield toRow(item);
  }
  return {
    format: f,
    release,
    write: (out) => (f === 'xlsx' ? writeXlsx(rows(), columns, out) : f === 'csv' ? writeCsv(rows(), columns, out) : writeJson(rows(), out)),
  };
}

/**
 * Answer with a prepared export, streamed: the API's Bearer route and the console's session route
 * both send it this way. A failure after the first byte can only cut the stream (the status is
 * gone by then); it is logged.
 */
export function sendBatchExport(request: FastifyRequest, reply: FastifyReply, batchId: string, exp: PreparedExport) {
  const body = new PassThrough();
  exp
    .write(body)
    .catch((err: unknown) => {
      request.log.error({ err }, 'batch export failed mid-stream');
      body.destroy(err as Error);
    })
    .finally(exp.release);
  return reply
    .type(EXPORT_CONTENT_TYPES[exp.format])
    .header('content-disposition', `attachment; filename="${batchId.replace(/[^A-Za-z0-9_-]/g, '')}.${exp.format}"`)
    .header('cache-control', 'no-store')
    .send(body);
}
