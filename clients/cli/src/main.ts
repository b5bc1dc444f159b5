import { parseArgs, type ParseArgsConfig } from 'node:util';
import { DEFAULT_BASE_URL, Lenstack, type Catalog, type LenstackOptions } from '@lenstack/client';
import { analyzeCommand } from './commands/analyze.ts';
import { catalogCommand, usageCommand } from './commands/account.ts';
import { batchCommand, resumeBatchCommand } from './commands/batch.ts';
import { enrichCommand } from './commands/enrich.ts';
import { lookupCommand } from './commands/lookup.ts';
import type { Context } from './context.ts';
import { CliError, EXIT, exitCodeOf } from './exit-codes.ts';
import { describeFailure } from './failure.ts';

export const HELP = `lenstack: photo analysis from the command line

Usage:
  lenstack analyze <photo|url>... [--stack <name>] [--lens <a,b>] [--refresh]
  lenstack lookup <photo|url>...  |  lenstack lookup --sha256 <hex> | --phash <hex> [--threshold <n>]
  lenstack enrich <photo|url> [-o <out>] [--formats exif,iptc,xmp] [--force]
  lenstack batch <folder|photo>... [--stack <name>] [--lens <a,b>] [--export <out.xlsx|.csv|.json>] [--force] [--state <file>]
  lenstack batch --vehicles <folder> [--manifest <vehicles.csv>] [--export <out>] [--force] [--state <file>]
  lenstack batch resume <bat_…> [--export <out>] [--force]   a paused batch (after buying credits), followed to its end
  lenstack catalog                 lenses and stacks
  lenstack usage                   your credits

Options:
  --json          machine-readable output on stdout (default: readable tables)
  -h, --help      this help        --version   the CLI's version

Environment:
  LENSTACK_API_KEY    your key (svc_live_… or svc_test_…), required
  LENSTACK_BASE_URL   the API (default ${DEFAULT_BASE_URL})

Batches:
  Photos are hashed, uploaded resumably (tus, 4 at a time, the same bytes once) and submitted as
  one batch of up to 10,000 photos. Stopped (Ctrl-C, lost connection, killed)? Run the same
  command again: it continues from its state file (.lenstack-batch.json in the folder, or
  --state), sends no photo twice and submits no second batch; once the batch exists it is followed.
  --vehicles: one sub-folder per vehicle (1 to 50 photos each); vehicles.csv in the folder (or
  --manifest) with the columns folder,vin,mileage,make,model,year gives each folder its data.

Exit codes:
  0 ok   2 usage (bad arguments, unreadable file, an unknown lens or stack: checked before sending)   3 auth (no key, key refused)
  4 not enough credits (or a batch paused for them)   5 other API error, or a batch with failed
  photos or cancelled   6 network (no answer)   1 a fault of the CLI   130 interrupted (run again)

Examples:
  lenstack analyze photo.jpg --stack full-analysis
  lenstack analyze photo.jpg --lens dating,location --json | jq .output.estimatedDate
  lenstack lookup photo.jpg
  lenstack enrich photo.jpg -o photo.enriched.jpg
  lenstack batch ./holiday --lens dating,describe --export holiday.xlsx
  lenstack batch --vehicles ./fleet --export fleet.csv
`;

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  stack: { type: 'string', short: 's' },
  lens: { type: 'string', short: 'l', multiple: true },
  refresh: { type: 'boolean' },
  sha256: { type: 'string' },
  phash: { type: 'string' },
  threshold: { type: 'string' },
  output: { type: 'string', short: 'o' },
  formats: { type: 'string', multiple: true },
  force: { type: 'boolean' },
  export: { type: 'string' },
  vehicles: { type: 'boolean' },
  manifest: { type: 'string' },
  state: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

/** Which options each command takes; anything else is a usage error rather than silently ignored. */
const ALLOWED: Record<string, ReadonlyArray<keyof typeof OPTIONS>> = {
  analyze: ['stack', 'lens', 'refresh'],
  lookup: ['sha256', 'phash', 'threshold'],
  enrich: ['output', 'formats', 'force'],
  batch: ['stack', 'lens', 'export', 'force', 'vehicles', 'manifest', 'state'],
  catalog: [],
  usage: [],
};
const COMMON = ['json', 'help', 'version'];

export interface CliEnv {
  apiKey: string | undefined;
  baseUrl: string;
}

/** The environment the CLI reads, read once here. */
export function cliEnv(env: NodeJS.ProcessEnv): CliEnv {
  return { apiKey: env.LENSTACK_API_KEY?.trim() || undefined, baseUrl: env.LENSTACK_BASE_URL?.trim() || DEFAULT_BASE_URL };
}

/** `clientOptions` lets tests give the client a sleep that records its waits. */
export async function main(argv: string[], env: CliEnv, io: { stdout: NodeJS.WriteStream; stderr: NodeJS.WriteStream }, clientOptions: Partial<LenstackOptions> = {}): Promise<number> {
  let json = argv.includes('--json');
  const errorContext: Record<string, string> = {};
  try {
    let parsed;
    try {
      parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    } catch (err) {
      throw new CliError(`${(err as Error).message}\nRun lenstack --help for usage.`, EXIT.USAGE);
    }
    const { values, positionals } = parsed;
    json = values.json === true;
    const [command, ...rest] = positionals;
    if (values.version) {
      io.stdout.write(`${VERSION}\n`);
      return EXIT.OK;
    }
    if (values.help || command === undefined || command === 'help') {
      (command === undefined && !values.help ? io.stderr : io.stdout).write(HELP);
      return command === undefined && !values.help ? EXIT.USAGE : EXIT.OK;
    }
    const allowed = ALLOWED[command];
    if (!allowed) throw new CliError(`unknown command "${command}"; run lenstack --help`, EXIT.USAGE);
    const stray = Object.keys(values).filter((k) => !COMMON.includes(k) && !allowed.includes(k as keyof typeof OPTIONS));
    if (stray.length) throw new CliError(`${command} does not take --${stray.join(', --')}`, EXIT.USAGE);
    if (!env.apiKey) throw new CliError('no API key: set LENSTACK_API_KEY (svc_live_… or svc_test_…)', EXIT.AUTH);

    const client = new Lenstack({ ...clientOptions, apiKey: env.apiKey, baseUrl: env.baseUrl });
    let catalog: Promise<Catalog> | undefined;
    const ctx: Context = {
      client, apiKey: env.apiKey, baseUrl: env.baseUrl, json, stdout: io.stdout, stderr: io.stderr,
      // Cut to the terminal's width; piped output is never cut.
      width: io.stdout.isTTY ? (io.stdout.columns ?? 100) : Number.POSITIVE_INFINITY,
      catalog: () => (catalog ??= client.catalog()),
      errorContext,
    };
    switch (command) {
      case 'analyze':
        return await analyzeCommand(ctx, { photos: rest, stack: values.stack, lens: values.lens, refresh: values.refresh });
      case 'lookup':
        return await lookupCommand(ctx, { photos: rest, sha256: values.sha256, phash: values.phash, threshold: values.threshold });
      case 'enrich':
        return await enrichCommand(ctx, { photos: rest, output: values.output, formats: values.formats, force: values.force });
      case 'batch':
        if (rest[0] === 'resume') {
          const stray = (['stack', 'lens', 'vehicles', 'manifest', 'state'] as const).filter((k) => values[k] !== undefined);
          if (stray.length) throw new CliError(`batch resume does not take --${stray.join(', --')}`, EXIT.USAGE);
          return await resumeBatchCommand(ctx, { id: rest[1], extra: rest.slice(2), export: values.export, force: values.force });
        }
        return await batchCommand(ctx, {
          paths: rest, stack: values.stack, lens: values.lens, export: values.export, force: values.force,
          vehicles: values.vehicles, manifest: values.manifest, state: values.state,
        });
      case 'catalog':
        return await catalogCommand(ctx);
      default:
        return await usageCommand(ctx);
    }
  } catch (err) {
    io.stderr.write(describeFailure(err, json, errorContext));
    return exitCodeOf(err);
  }
}

/** The CLI's version (it ships with the client, so it shares its number). */
/** The CLI's version: the API document's it is built from (tools/scripts/pack-client.ts versions both packages with it). */
const VERSION = '1.1.0';
