import { extname } from 'node:path';
import type { Batch, BatchItem, BatchRequest, ExportFormat } from '@lenstack/client';
import { listOption, print, printJson, type Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { collectPhotos, readBatchItems } from '../files.ts';
import { OutputFile } from '../output.ts';
import { Progress } from '../progress.ts';
import { table } from '../render.ts';

export interface BatchArgs {
  paths: string[];
  stack?: string | undefined;
  lens?: string[] | undefined;
  export?: string | undefined;
  force?: boolean | undefined;
}

const EXPORT_FORMATS: Record<string, ExportFormat> = { '.xlsx': 'xlsx', '.csv': 'csv', '.json': 'json' };

/**
 * `lenstack batch <folder|photo>... [--stack name] [--lens a,b] [--export out.xlsx] [--force]`: one
 * batch of every photo found (at most what one request carries), followed to the end (a progress
 * bar on a terminal), then exported. The batch id goes to stderr as soon as the batch exists. Exit
 * 0 only when every photo was analyzed; 4 when the batch paused for credits (`resume` continues it
 * after a purchase); 5 when photos failed, or the batch was cancelled or paused by request.
 */
export async function batchCommand(ctx: Context, args: BatchArgs): Promise<number> {
  if (args.paths.length === 0) throw new CliError('batch needs a folder or photos', EXIT.USAGE);
  const format = args.export === undefined ? undefined : EXPORT_FORMATS[extname(args.export).toLowerCase()];
  if (args.export !== undefined && !format) throw new CliError(`--export names the format by its extension: ${Object.keys(EXPORT_FORMATS).join(', ')}`, EXIT.USAGE);
  const photos = await collectPhotos(args.paths);
  const lenses = listOption(args.lens);
  const items = await readBatchItems(photos);
  const body: BatchRequest = { items, ...(lenses.length ? { modules: lenses as BatchRequest['modules'] } : {}), ...(args.stack ? { preset: args.stack as BatchRequest['preset'] } : {}) };
  // Claimed before the batch is paid for, like enrich's output: an export that cannot be written is found now.
  const output = args.export !== undefined ? await OutputFile.claim(args.export, args.force === true) : undefined;

  let batch: Batch;
  const failed: BatchItem[] = [];
  try {
    const created = await ctx.client.batches.create(body);
    ctx.errorContext.batchId = created.id;
    ctx.stderr.write(`batch ${created.id} submitted (${created.counts.total} photo${created.counts.total === 1 ? '' : 's'})\n`);
    const progress = new Progress(ctx.stderr, 'batch');
    try {
      const show = (b: Batch) => progress.update(b.counts.done + b.counts.failed, b.counts.total, b.etaSeconds !== null ? `about ${b.etaSeconds}s left` : '');
      show(created);
      batch = await ctx.client.batches.wait(created.id, { onProgress: show });
    } finally {
      progress.finish();
    }
    if (batch.status === 'running') throw new CliError(`batch ${batch.id} is still running; follow it with GET /v1/batches/${batch.id}`, EXIT.API);
    for await (const item of ctx.client.batches.allItems(batch.id)) if (item.status === 'failed') failed.push(item);
    if (output && format && batch.status !== 'paused') await output.commit(await ctx.client.batches.export(batch.id, format));
  } finally {
    // Not written (paused, or a failure above): nothing is left behind.
    await output?.abandon();
  }
  const exported = output && batch.status !== 'paused' ? output.target : null;

  if (ctx.json) printJson(ctx, { batch, failed, export: exported });
  else {
    const c = batch.counts;
    const lines = [`batch ${batch.id} ${batch.status}${batch.pauseReason ? ` (${batch.pauseReason})` : ''}: ${c.done} done, ${c.failed} failed, ${c.pending} pending; ${batch.creditsCharged} credits`];
    if (failed.length) lines.push(table(failed.map((i): [string, string] => [i.source, `${i.error?.code ?? 'failed'}: ${i.error?.message ?? ''}`]), '  ', ctx.width));
    if (exported) lines.push(`exported to ${exported}`);
    print(ctx, lines.join('\n'));
  }
  if (batch.status === 'paused') {
    if (batch.pauseReason === 'credits') {
      ctx.stderr.write(`batch ${batch.id} paused: not enough credits. Buy credits, then resume it (POST /v1/batches/${batch.id}/resume).\n`);
      return EXIT.CREDITS;
    }
    ctx.stderr.write(`batch ${batch.id} was paused.\n`);
    return EXIT.API;
  }
  if (batch.status === 'cancelled') {
    // What a cancelled (or expired) batch did not run fails with BATCH_FINISHED; batches cancelled earlier left it pending.
    ctx.stderr.write(`batch ${batch.id} was cancelled: ${batch.counts.total - batch.counts.done} photos were not analyzed.\n`);
    return EXIT.API;
  }
  if (failed.length > 0 || batch.counts.failed > 0) {
    ctx.stderr.write(`batch ${batch.id}: ${batch.counts.failed} of ${batch.counts.total} photos failed.\n`);
    return EXIT.API;
  }
  return EXIT.OK;
}
