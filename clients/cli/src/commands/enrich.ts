import { extname } from 'node:path';
import { listOption, print, printJson, type Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { imageField, photoInput } from '../files.ts';
import { failureWriter } from '../failure.ts';
import { OutputFile } from '../output.ts';

export interface EnrichArgs {
  photos: string[];
  output?: string | undefined;
  formats?: string[] | undefined;
  force?: boolean | undefined;
}

const FORMATS = ['exif', 'iptc', 'xmp'] as const;
type Format = (typeof FORMATS)[number];

/**
 * `lenstack enrich <photo|url> [-o out.jpg] [--formats exif,iptc,xmp] [--force]`: the photo with
 * what the account's lenses found written into its metadata (5 credits). The output defaults to
 * `<name>.enriched<ext>` beside the input and never replaces an existing file without --force.
 * The output is claimed before the API is asked, so a folder that cannot be written costs nothing.
 */
export async function enrichCommand(ctx: Context, args: EnrichArgs): Promise<number> {
  if (args.photos.length !== 1) throw new CliError('enrich takes exactly one photo (a file or an http(s) URL)', EXIT.USAGE);
  const input = photoInput(args.photos[0]!);
  const formats = listOption(args.formats);
  const unknown = formats.filter((f) => !(FORMATS as readonly string[]).includes(f));
  if (unknown.length) throw new CliError(`unknown format ${unknown.join(', ')}: use ${FORMATS.join(', ')}`, EXIT.USAGE);
  const output = args.output ?? defaultOutput(input.kind === 'file' ? input.path : new URL(input.url).pathname.split('/').pop() || 'photo.jpg');
  const image = await imageField(input);

  const file = await OutputFile.claim(output, args.force === true, failureWriter(ctx));
  let result;
  try {
    result = await ctx.client.enrich({ ...image, formats: (formats.length ? formats : [...FORMATS]) as Format[] });
  } catch (err) {
    await file.abandon();
    throw err;
  }
  await file.commit(Buffer.from(result.imageBase64, 'base64'));
  const { imageBase64: _bytes, ...summary } = result;
  if (ctx.json) printJson(ctx, { ...summary, output });
  else {
    const written = result.formatsWritten.length ? result.formatsWritten.join(', ') : 'nothing (no lens output fits this file)';
    print(ctx, `wrote ${output}: ${written}; ${result.meta.creditsCharged} credits (request ${result.meta.requestId})`);
  }
  return EXIT.OK;
}

export function defaultOutput(path: string): string {
  const ext = extname(path);
  return `${path.slice(0, path.length - ext.length)}.enriched${ext || '.jpg'}`;
}
