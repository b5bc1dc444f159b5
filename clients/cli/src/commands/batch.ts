import { rename, unlink, writeFile } from 'node:fs/promises';
import { extname } from 'node:path';
import type { Batch, BatchItem, BatchRequest, ExportFormat } from '@lenstack/client';
import { listOption, print, printJson, type Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { collectPhotos, readPhoto } from '../files.ts';
import { Progress } from '../progress.ts';
import { table } from '../render.ts';

export interface BatchArgs {
  paths: string[];
  stack?: string | undefined;
  lens?: string[] | undefined;
  export?: string | undefined;
}

const EXPORT_FORMATS: Record<string, ExportFormat> = { '.xlsx': 'xlsx', '.csv': 'csv', '.json': 'json' };

/**
 * `lenstack batch <folder|photo>... [--stack name] [--lens a,b] [--export out.xlsx]`: one batch
 * of every photo found, followed to the end (a progress bar on a terminal), then exported. A batch
 * that pauses for credits exits 4 and names the batch, which `resume` continues after a purchase.
 */
export async function batchCommand(ctx: Context, args: BatchArgs): Promise<number> {
  if (args.paths.length === 0) throw new CliError('batch needs a folder or photos', EXIT.USAGE);
  const format = args.export === undefined ? undefined : EXPORT_FORMATS[extname(args.export).toLowerCase()];
  if (args.export !== undefined && !format) throw new CliError(`--export names the format by its extension: ${Object.keys(EXPORT_FORMATS).join(', ')}`, EXIT.USAGE);
  const photos = await collectPhotos(args.paths);
  const lenses = listOption(args.lens);
  const items = await Promise.all(photos.map(async (p) => ({ base64: (await readPhoto(p.path)).toString('base64'), name: p.name })));
  const body: BatchRequest = { items, ...(lenses.length ? { modules: lenses } : {}), ...(args.stack ? { preset: args.stack } : {}) };

  const progress = new Progress(ctx.stderr, 'batch');
  const created = await ctx.client.batches.create(body);
  const show = (b: Batch) => progress.update(b.counts.done + b.counts.failed, b.counts.total, b.etaSeconds !== null ? `about ${b.etaSeconds}s left` : '');
  show(created);
  const batch = await ctx.client.batches.wait(created.id, { onProgress: show });
  progress.finish();

  const failed: BatchItem[] = [];
  for await (const item of ctx.client.batches.allItems(batch.id)) if (item.status === 'failed') failed.push(item);
  let exported: string | null = null;
  if (args.export && format && batch.status !== 'paused') {
    const bytes = await ctx.client.batches.export(batch.id, format);
    const partial = `${args.export}.partial-${process.pid}`;
    try {
      await writeFile(partial, bytes);
      await rename(partial, args.export);
    } catch (err) {
      await unlink(partial).catch(() => {});
      throw new CliError(`cannot write ${args.export}: ${(err as Error).message}`, EXIT.USAGE);
    }
    exported = args.export;
  }

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
  return EXIT.OK;
}
