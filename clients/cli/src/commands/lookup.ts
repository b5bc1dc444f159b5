import { createHash } from 'node:crypto';
import type { Lookup, LookupResult } from '@lenstack/client';
import { print, printJson, type Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { photoInput, readPhoto } from '../files.ts';
import { table } from '../render.ts';

export interface LookupArgs {
  photos: string[];
  sha256?: string | undefined;
  phash?: string | undefined;
  threshold?: string | undefined;
}

/**
 * `lenstack lookup <photo|url>...` or `lenstack lookup --sha256 <hex>` / `--phash <hex>`: what the
 * account already knows about these photos, free. "none" is an answer, not a failure (exit 0).
 */
export async function lookupCommand(ctx: Context, args: LookupArgs): Promise<number> {
  const threshold = args.threshold === undefined ? undefined : Number(args.threshold);
  if (threshold !== undefined && !(Number.isInteger(threshold) && threshold >= 0 && threshold <= 64)) throw new CliError('--threshold takes an integer from 0 to 64', EXIT.USAGE);
  const byFingerprint = args.sha256 !== undefined || args.phash !== undefined;
  if (byFingerprint && args.photos.length) throw new CliError('lookup takes photos or a fingerprint (--sha256, --phash), not both', EXIT.USAGE);
  if (args.sha256 !== undefined && args.phash !== undefined) throw new CliError('give one of --sha256 and --phash', EXIT.USAGE);

  let lookup: Lookup;
  let names: Map<string, string>;
  if (byFingerprint) {
    const key = (args.sha256 ?? args.phash)!;
    lookup = await ctx.client.lookupByFingerprint(args.sha256 !== undefined ? { sha256: args.sha256 } : { pHash: args.phash!, ...(threshold !== undefined ? { threshold } : {}) });
    names = new Map([[key, key]]);
  } else {
    if (args.photos.length === 0) throw new CliError('lookup needs photos (files or http(s) URLs), --sha256 or --phash', EXIT.USAGE);
    const inputs = args.photos.map(photoInput);
    const urls = inputs.flatMap((i) => (i.kind === 'url' ? [i.url] : []));
    if (urls.length && urls.length !== inputs.length) throw new CliError('lookup takes either files or URLs in one call, not both', EXIT.USAGE);
    names = new Map();
    if (urls.length) {
      lookup = await ctx.client.lookup({ images: urls, ...(threshold !== undefined ? { threshold } : { threshold: 5 }) });
    } else {
      const bytes = await Promise.all(inputs.map((i) => readPhoto((i as { path: string }).path)));
      bytes.forEach((b, n) => names.set(createHash('sha256').update(b).digest('hex'), inputs[n]!.name));
      lookup = await ctx.client.lookup({ images_base64: bytes.map((b) => b.toString('base64')), threshold: threshold ?? 5 });
    }
  }
  if (ctx.json) {
    printJson(ctx, lookup);
    return EXIT.OK;
  }
  const rows: Array<[string, string]> = Object.entries(lookup.results).map(([key, r]) => [names.get(key) ?? key, describe(r)]);
  print(ctx, `${table(rows, '', ctx.width)}\n${lookup.meta.imagesMatched} of ${lookup.meta.imagesSubmitted} found`);
  return EXIT.OK;
}

function describe(r: LookupResult): string {
  if (r.matchType === 'none' || !r.photo) return 'none: never analyzed with this account';
  const lenses = Object.keys(r.photo.lenses).filter((l) => l !== 'moderation').sort();
  const distance = r.matchType === 'fuzzy' ? ` (distance ${r.hammingDistance ?? '?'})` : '';
  return `${r.matchType}${distance}  sha256 ${r.photo.sha256}  lenses: ${lenses.join(', ') || 'moderation only'}  last analyzed ${r.photo.lastAnalyzedAt}`;
}
