import { LenstackError, type Analysis, type AnalyzeRequest } from '@lenstack/client';
import { checkNames } from '../names.ts';
import { listOption, print, printJson, type Context } from '../context.ts';
import { CliError, EXIT, exitCodeOf } from '../exit-codes.ts';
import { imageField, photoInput, readPhoto, type PhotoInput } from '../files.ts';
import { Progress } from '../progress.ts';
import { formatCell, lensRows, table } from '../render.ts';

export interface AnalyzeArgs {
  photos: string[];
  stack?: string | undefined;
  lens?: string[] | undefined;
  refresh?: boolean | undefined;
}

const VEHICLE_STACK = 'vehicle-condition';

/**
 * `lenstack analyze <photo|url>... [--stack name] [--lens a,b] [--refresh]`: each photo is its own
 * analysis (its own result and bill), one after another, except the vehicle-condition stack, which
 * takes every photo as one vehicle. A photo that fails does not stop the others; auth, credit and
 * network failures do (the next photo would fail the same way).
 */
export async function analyzeCommand(ctx: Context, args: AnalyzeArgs): Promise<number> {
  if (args.photos.length === 0) throw new CliError('analyze needs at least one photo (a file or an http(s) URL)', EXIT.USAGE);
  const lenses = listOption(args.lens);
  checkNames(lenses, args.stack);
  const selection: Pick<AnalyzeRequest, 'preset' | 'modules' | 'refresh' | 'options'> = {
    // Checked above against the document's names, and again by the API.
    ...(lenses.length ? { modules: lenses as AnalyzeRequest['modules'] } : {}),
    ...(args.stack ? { preset: args.stack as AnalyzeRequest['preset'] } : {}),
    ...(args.refresh ? { refresh: true } : {}),
    options: { includeFingerprint: true },
  };
  const inputs = args.photos.map(photoInput);
  // Every file is read before the first request, so a typo in the last name costs nothing.
  for (const input of inputs) if (input.kind === 'file') await readPhoto(input.path);

  if (args.stack === VEHICLE_STACK) {
    const images = await Promise.all(inputs.map(async (i) => (i.kind === 'url' ? { url: i.url } : { base64: (await readPhoto(i.path)).toString('base64') })));
    const analysis = await ctx.client.analyze({ ...selection, images } as AnalyzeRequest);
    if (ctx.json) printJson(ctx, analysis);
    else print(ctx, `${inputs.map((i) => i.name).join(', ')}\n${header(analysis)}\n${table(Object.entries(analysis.output).map(([k, v]) => [k, formatCell(v, undefined)]), '  ', ctx.width)}`);
    return EXIT.OK;
  }

  const progress = new Progress(ctx.stderr, 'analyzing');
  const results: Array<{ file: string; analysis?: Analysis; error?: ReturnType<typeof errorJson> }> = [];
  let exit: number = EXIT.OK;
  let stop: unknown;
  try {
    for (const [n, input] of inputs.entries()) {
      progress.update(n, inputs.length, input.name);
      try {
        const analysis = await ctx.client.analyze({ ...selection, ...(await imageField(input)) } as AnalyzeRequest);
        results.push({ file: input.name, analysis });
        if (!ctx.json) {
          progress.finish();
          print(ctx, await readable(ctx, input, analysis));
        }
      } catch (err) {
        if (!(err instanceof LenstackError)) throw err;
        const code = exitCodeOf(err);
        // One photo: its failure is the command's, reported like any other (stderr, exit code).
        if (inputs.length === 1) throw err;
        if (exit === EXIT.OK) exit = code;
        results.push({ file: input.name, error: errorJson(err) });
        // Auth, credits, network: the next photo would fail the same way. What was billed so far is still printed.
        if (code !== EXIT.API) {
          stop = err;
          exit = code;
          break;
        }
        if (!ctx.json) {
          progress.finish();
          ctx.stderr.write(`${input.name}: ${err.message} (${err.code}, request ${err.requestId})\n`);
        }
      }
    }
  } finally {
    progress.finish();
  }
  if (ctx.json) printJson(ctx, inputs.length === 1 ? results[0]!.analysis : results);
  if (stop !== undefined) throw stop;
  return exit;
}

export function errorJson(err: LenstackError) {
  return { code: err.code, message: err.message, status: err.status, requestId: err.requestId };
}

function header(a: Analysis): string {
  const credits = a.usage.creditsCharged ?? 0;
  const parts = [
    a.fingerprint ? `sha256 ${a.fingerprint.sha256}` : null,
    `${credits} credit${credits === 1 ? '' : 's'}`,
    a.meta.cacheHit ? 'from the registry' : `${a.meta.vendor} ${a.meta.model}`,
    `request ${a.meta.requestId}`,
  ].filter(Boolean);
  return `  ${parts.join('  ·  ')}${a.warnings.length ? `\n  warnings: ${a.warnings.join('; ')}` : ''}`;
}

async function readable(ctx: Context, input: PhotoInput, a: Analysis): Promise<string> {
  const catalog = await ctx.catalog();
  return `${input.name}\n${header(a)}\n${lensRows(catalog, a.usage.modulesUsed, a, ctx.width)}\n`;
}
