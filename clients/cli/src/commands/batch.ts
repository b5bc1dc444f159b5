import { createHash, randomUUID } from 'node:crypto';
import { checkNames } from '../names.ts';
import { extname, join, resolve } from 'node:path';
import { LenstackError, type Batch, type BatchItem, type BatchRequest, type ExportFormat } from '@lenstack/client';
import { BatchState, DEFAULT_STATE_NAME } from '../batch-state.ts';
import { listOption, print, printJson, type Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { collectPhotos, hashFile, mapLimit, type FoundPhoto } from '../files.ts';
import { whileInterruptible } from '../interrupt.ts';
import { failureWriter } from '../failure.ts';
import { OutputFile } from '../output.ts';
import { Progress } from '../progress.ts';
import { table } from '../render.ts';
import { chooseUploadIds, dropExpired, uploadAll, type UploadJob } from '../uploads.ts';
import { MAX_BATCH_PHOTOS, planVehicles, type PlannedVehicle } from '../vehicles.ts';

export interface BatchArgs {
  paths: string[];
  stack?: string | undefined;
  lens?: string[] | undefined;
  export?: string | undefined;
  force?: boolean | undefined;
  vehicles?: boolean | undefined;
  manifest?: string | undefined;
  state?: string | undefined;
}

const EXPORT_FORMATS: Record<string, ExportFormat> = { '.xlsx': 'xlsx', '.csv': 'csv', '.json': 'json' };
const VEHICLE_STACK = 'vehicle-condition';
/** Files hashed at once. */
const HASH_CONCURRENCY = 4;
/**
 * Finished uploads older than this are asked about (HEAD) before the batch is submitted: the API
 * expires an upload unused for UPLOAD_TTL_MS (24 h by default).
 */
const ASK_AFTER_MS = 12 * 3600_000;
/** Submissions answered 404 for expired uploads before giving up (each re-uploads what it found gone). */
const MAX_EXPIRY_ROUNDS = 3;
/** The API's bound on an item's name (openapi/lenstack.json BatchRequest). */
const MAX_NAME = 500;

/**
 * A photo of the batch, hashed: the found photo itself with its hash set on it, not a copy (one
 * object per photo for the whole run: docs/decisions.md, "The CLI's memory does not grow with the
 * fleet").
 */
type Hashed = FoundPhoto & { sha256: string };
/** A vehicle whose photos are hashed. */
type HashedVehicle = Omit<PlannedVehicle, 'photos'> & { photos: Hashed[] };

/**
 * `lenstack batch <folder|photo>... [--stack name] [--lens a,b] [--export out.xlsx] [--force]
 * [--vehicles [--manifest vehicles.csv]] [--state file]`: every photo found is hashed, uploaded
 * once per distinct content (tus, resumable, four at a time), and one batch naming the uploads is
 * submitted, followed to the end (progress on a terminal) and exported. A state file
 * (`.lenstack-batch.json` in the folder, or `--state`) makes running the same command again
 * continue where it stopped: finished uploads are not sent again, a half-sent one goes on from
 * its offset, and the batch is submitted under the request id it was first sent with (the API
 * answers a resend with the batch the first send made); once the batch exists it is followed,
 * never paid for again. A fleet (`--vehicles`) is submitted first and uploads while its batch
 * runs (runFleet). Exit 0 only when every photo was analyzed; 4 when the batch paused for
 * credits; 5 when photos failed (at upload or in the batch), or the batch was cancelled or paused
 * by request; 130 when interrupted (run it again to continue).
 */
export async function batchCommand(ctx: Context, args: BatchArgs): Promise<number> {
  if (args.paths.length === 0) throw new CliError('batch needs a folder or photos', EXIT.USAGE);
  const format = args.export === undefined ? undefined : EXPORT_FORMATS[extname(args.export).toLowerCase()];
  if (args.export !== undefined && !format) throw new CliError(`--export names the format by its extension: ${Object.keys(EXPORT_FORMATS).join(', ')}`, EXIT.USAGE);
  const lenses = listOption(args.lens);
  checkNames(lenses, args.stack);
  if (args.manifest !== undefined && !args.vehicles) throw new CliError('--manifest goes with --vehicles', EXIT.USAGE);
  if (args.vehicles) {
    if (args.paths.length !== 1) throw new CliError('--vehicles takes one folder, with one sub-folder per vehicle', EXIT.USAGE);
    if (lenses.length) throw new CliError(`--vehicles runs the ${VEHICLE_STACK} stack: it takes no --lens`, EXIT.USAGE);
    if (args.stack !== undefined && args.stack !== VEHICLE_STACK) throw new CliError(`--vehicles runs the ${VEHICLE_STACK} stack, not ${args.stack}`, EXIT.USAGE);
  } else if (args.stack === VEHICLE_STACK) {
    throw new CliError(`the ${VEHICLE_STACK} stack needs photos grouped by vehicle: lenstack batch --vehicles <folder>`, EXIT.USAGE);
  }

  // What the batch holds, checked whole before a byte is read or sent.
  const vehicles = args.vehicles ? await planVehicles(args.paths[0]!, args.manifest) : null;
  const found = vehicles ? null : await collectPhotos(args.paths);
  if (found && found.length > MAX_BATCH_PHOTOS) throw new CliError(`${found.length} photos: a batch takes at most ${MAX_BATCH_PHOTOS}; run lenstack batch on parts of the folder`, EXIT.USAGE);

  const statePath = args.state ?? (args.paths.length === 1 && !found?.some((p) => p.path === args.paths[0]) ? join(args.paths[0]!, DEFAULT_STATE_NAME) : DEFAULT_STATE_NAME);
  const state = BatchState.open(statePath, { key: createHash('sha256').update(ctx.apiKey).digest('hex').slice(0, 16) });
  // Claimed before anything is uploaded or paid for, like enrich's output: an export that cannot be written is found now.
  const output = args.export !== undefined ? await OutputFile.claim(args.export, args.force === true, failureWriter(ctx)) : undefined;
  try {
    return await run(ctx, args, { vehicles, found, state, lenses, format, output });
  } finally {
    // Not written (paused, interrupted, a failure): nothing is left behind.
    await output?.abandon();
  }
}

async function run(
  ctx: Context,
  args: BatchArgs,
  plan: { vehicles: PlannedVehicle[] | null; found: FoundPhoto[] | null; state: BatchState; lenses: string[]; format: ExportFormat | undefined; output: OutputFile | undefined },
): Promise<number> {
  const { vehicles, found, state, lenses, format, output } = plan;
  const all: FoundPhoto[] = vehicles ? vehicles.flatMap((v) => v.photos) : found!;

  // Hashed first (a rerun trusts the hash it kept for the same path, size and time): the same bytes go up once.
  const hashing = new Progress(ctx.stderr, 'hashing');
  let hashedCount = 0;
  try {
    await mapLimit(all, HASH_CONCURRENCY, async (p) => {
      const key = resolve(p.path);
      const kept = state.hashes.get(key);
      let sha256 = kept && kept.size === p.size && kept.mtimeMs === p.mtimeMs ? kept.sha256 : null;
      if (!sha256) {
        sha256 = await hashFile(p.path);
        state.record({ hash: { path: key, size: p.size, mtimeMs: p.mtimeMs, sha256 } });
      }
      hashing.update(++hashedCount, all.length);
      (p as Hashed).sha256 = sha256;
    });
  } finally {
    hashing.finish();
    // Read by the hashing only; the journal keeps them for the next run.
    state.forgetHashes();
  }
  const hashed = all as Hashed[];
  const bySha = new Map(hashed.map((p) => [p.sha256, p]));
  // Typed as the document's names; the API names an unknown one in its 400.
  const options = { ...(lenses.length ? { modules: lenses as BatchRequest['modules'] } : {}), ...(args.stack && !vehicles ? { preset: args.stack as BatchRequest['preset'] } : {}) };
  const planKey = vehicles ? vehiclePlanKey(vehicles as HashedVehicle[]) : photoPlanKey(hashed, options);

  let batchId = state.batches.get(planKey);
  const uploadsSummary = { photos: all.length, distinct: bySha.size, uploaded: 0, resumed: 0, alreadyUploaded: 0, bytesSent: 0, expired: 0 };
  const endpoint = `${ctx.baseUrl.replace(/\/+$/, '')}/v1/uploads`;
  /** Uploads what is not uploaded yet; `beside` a batch already running, its bar shows the uploads instead. */
  const uploadMissing = async (o: { fresh?: ReadonlySet<string>; beside?: (done: number, total: number) => void } = {}) => {
    const jobs: UploadJob[] = [...bySha.values()];
    const before = jobs.filter((j) => state.uploaded.has(j.sha256) || state.refused.has(j.sha256)).length;
    const totalBytes = jobs.reduce((n, j) => n + j.size, 0);
    const progress = o.beside ? { update: o.beside, finish: () => undefined } : new Progress(ctx.stderr, 'upload');
    const started = Date.now();
    const stop = new AbortController();
    const interrupt = () => stop.abort(new CliError(`interrupted; run the same command again to continue (state in ${state.path})`, EXIT.INTERRUPTED));
    try {
      const outcome = await whileInterruptible(interrupt, () => uploadAll({
        jobs, state, signal: stop.signal, endpoint, apiKey: ctx.apiKey, ...(o.fresh ? { fresh: o.fresh, withBody: true } : {}),
        onProgress: (p) => {
          const seconds = (Date.now() - started) / 1000;
          const rate = seconds > 0.5 ? `  ${size(p.sentThisRun / seconds)}/s` : '';
          progress.update(p.photos, jobs.length, `${size(p.bytes)} of ${size(totalBytes)}${rate}`);
        },
      }));
      uploadsSummary.uploaded += outcome.started;
      uploadsSummary.resumed += outcome.resumed;
      uploadsSummary.bytesSent += outcome.bytesSent;
    } finally {
      progress.finish();
    }
    if (!ctx.json) ctx.stderr.write(`uploaded ${uploadsSummary.uploaded + uploadsSummary.resumed} of ${jobs.length} distinct photos (${size(uploadsSummary.bytesSent)} sent${before ? `; ${before} were uploaded before` : ''}${uploadsSummary.resumed ? `; ${uploadsSummary.resumed} resumed` : ''})\n`);
    return before;
  };
  if (vehicles) {
    return runFleet(ctx, { vehicles, bySha, state, planKey, format, output, stack: args.stack, endpoint, uploadsSummary, uploadMissing });
  }
  if (batchId) {
    ctx.stderr.write(`batch ${batchId} was submitted by an earlier run of this command (state in ${state.path}); following it\n`);
  } else {
    // Uploads finished long ago may have expired (UPLOAD_TTL_MS, 24 h unused): asked first, sent again if gone.
    uploadsSummary.expired = await dropExpired({ state, shas: [...bySha.keys()], endpoint, apiKey: ctx.apiKey, olderThanMs: ASK_AFTER_MS });
    uploadsSummary.alreadyUploaded = await uploadMissing();
  }

  // Photos the API refused at upload (not an image it takes) fail here.
  const refusedPhotos = hashed.filter((p) => state.refused.has(p.sha256)).map((p) => ({ source: p.name, ...state.refused.get(p.sha256)! }));
  const leftOut: string[] = [];
  const buildBody = (): BatchRequest | null => {
    const items = hashed.filter((p) => !state.refused.has(p.sha256)).map((p) => ({ uploadId: state.uploaded.get(p.sha256)!, name: itemName(p.name) }));
    return items.length ? { items, ...options } : null;
  };
  const body = buildBody();
  const failedAtUpload = { refused: refusedPhotos };
  if (!body) {
    if (ctx.json) printJson(ctx, { batch: null, failed: [], ...failedAtUpload, uploads: uploadsSummary, state: state.path, export: null });
    else print(ctx, `no batch: the API refused every photo\n${refusalTable(ctx, refusedPhotos)}`);
    return EXIT.API;
  }

  let first: Batch | null = null;
  if (!batchId) {
    const created = await submitPlan(ctx, { state, planKey, shas: [...bySha.keys()], idOf: (sha) => state.uploaded.get(sha), body: () => buildBody()!, uploadsSummary,
      // Those photos go up again before the batch is sent under a new id.
      again: async () => {
        uploadsSummary.expired += await dropExpired({ state, shas: [...bySha.keys()], endpoint, apiKey: ctx.apiKey, olderThanMs: 0 });
        await uploadMissing();
      },
    });
    state.record({ batch: { plan: planKey, id: created.id } });
    batchId = created.id;
    first = created;
    ctx.stderr.write(`batch ${created.id} submitted (${created.counts.total} photo${created.counts.total === 1 ? '' : 's'})\n`);
  }
  return follow(ctx, batchId, first, {
    vehicles: false,
    format,
    output,
    refusedPhotos,
    leftOut,
    json: { ...failedAtUpload, uploads: uploadsSummary, state: state.path },
  });
}

interface FollowOptions {
  /** A vehicle batch (the words of the summary). */
  vehicles: boolean;
  format: ExportFormat | undefined;
  output: OutputFile | undefined;
  /** Photos the API refused when their upload finished (not in the batch). */
  refusedPhotos: Array<{ source: string; code: string; message: string }>;
  leftOut: string[];
  /** More for the --json answer. */
  json: Record<string, unknown>;
  /** Awaited once the batch ended, before the summary (the uploads that ran beside it). */
  settle?: () => Promise<void>;
  /** What the bar says beside the batch's own progress. */
  note?: () => string;
  signal?: AbortSignal;
}

/**
 * Follows a batch to its end (a progress bar on a terminal), exports it when asked, prints the
 * summary and returns the exit code: 0 all done, 4 paused for credits, 5 failed photos, a
 * cancellation or a pause by request.
 */
async function follow(ctx: Context, batchId: string, first: Batch | null, o: FollowOptions): Promise<number> {
  const { output, format, refusedPhotos, leftOut } = o;
  const vehicles = o.vehicles;
  let batch: Batch;
  const failed: BatchItem[] = [];
  ctx.errorContext.batchId = batchId;
  const progress = new Progress(ctx.stderr, 'batch');
  try {
    const show = (b: Batch) => progress.update(b.counts.done + b.counts.failed, b.counts.total, [o.note?.() ?? '', b.etaSeconds !== null ? `about ${b.etaSeconds}s left` : ''].filter(Boolean).join('  '));
    show(first ?? (await ctx.client.batches.get(batchId)));
    batch = await ctx.client.batches.wait(batchId, { onProgress: show, ...(o.signal ? { signal: o.signal } : {}) });
  } finally {
    progress.finish();
  }
  await o.settle?.();
  if (batch.status === 'running') throw new CliError(`batch ${batch.id} is still running; follow it with GET /v1/batches/${batch.id}`, EXIT.API);
  for await (const it of ctx.client.batches.allItems(batch.id)) if (it.status === 'failed') failed.push(it);
  if (output && format && batch.status !== 'paused') await output.commit(await ctx.client.batches.exportStream(batch.id, format));
  const exported = output && batch.status !== 'paused' ? output.target : null;

  if (ctx.json) printJson(ctx, { batch, failed, ...o.json, export: exported });
  else {
    const c = batch.counts;
    const lines = [`batch ${batch.id} ${batch.status}${batch.pauseReason ? ` (${batch.pauseReason})` : ''}: ${c.done} done, ${c.failed} failed, ${c.pending} pending; ${batch.creditsCharged} credits`];
    if (failed.length) lines.push(table(failed.map((i): [string, string] => [i.source, `${i.error?.code ?? 'failed'}: ${i.error?.message ?? ''}`]), '  ', ctx.width));
    if (refusedPhotos.length) lines.push(`refused at upload, not in the batch${leftOut.length ? ` (vehicles left out: ${leftOut.join(', ')})` : ''}:\n${refusalTable(ctx, refusedPhotos)}`);
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
    ctx.stderr.write(`batch ${batch.id}: ${batch.counts.failed} of ${batch.counts.total} ${vehicles ? 'vehicles' : 'photos'} failed.\n`);
    return EXIT.API;
  }
  if (refusedPhotos.length) {
    ctx.stderr.write(`batch ${batch.id}: ${refusedPhotos.length} photo${refusedPhotos.length === 1 ? ' was' : 's were'} refused at upload and not analyzed.\n`);
    return EXIT.API;
  }
  return EXIT.OK;
}

const RESUME_POLLS = 40;
const RESUME_POLL_MS = 250;

/**
 * `lenstack batch resume <bat_…> [--export out] [--force]`: resumes a paused batch (after buying
 * credits, or one paused by request) and follows it to the end like `batch` does, with the same
 * exit codes. A batch that is running already is followed; a finished one is refused (exit 5).
 */
export async function resumeBatchCommand(ctx: Context, args: { id: string | undefined; extra: string[]; export: string | undefined; force: boolean | undefined }): Promise<number> {
  if (!args.id || args.extra.length > 0 || !/^bat_[A-Za-z0-9_-]{1,100}$/.test(args.id)) throw new CliError('usage: lenstack batch resume <bat_…> [--export out.xlsx] [--force]', EXIT.USAGE);
  const format = args.export === undefined ? undefined : EXPORT_FORMATS[extname(args.export).toLowerCase()];
  if (args.export !== undefined && !format) throw new CliError(`--export names the format by its extension: ${Object.keys(EXPORT_FORMATS).join(', ')}`, EXIT.USAGE);
  const output = args.export !== undefined ? await OutputFile.claim(args.export, args.force === true, failureWriter(ctx)) : undefined;
  try {
    ctx.errorContext.batchId = args.id;
    const current = await ctx.client.batches.get(args.id);
    let resumed = current.status === 'paused' ? await ctx.client.batches.resume(args.id) : current;
    if (current.status === 'paused') {
      ctx.stderr.write(`batch ${args.id} resumed\n`);
      // The resume reaches the batch's workflow as a signal: until the workflow acts on it, the
      // batch still reads paused. Give it a moment (bounded) before following, else the follow
      // would end at once on the old status; one that pauses again for credits is reported so.
      for (let i = 0; resumed.status === 'paused' && i < RESUME_POLLS; i++) {
        await new Promise((r) => setTimeout(r, RESUME_POLL_MS));
        resumed = await ctx.client.batches.get(args.id);
      }
    }
    return await follow(ctx, args.id, resumed, { vehicles: resumed.kind === 'vehicles', format, output, refusedPhotos: [], leftOut: [], json: {} });
  } finally {
    await output?.abandon();
  }
}

/**
 * What identifies a batch's plan in the state (its request id and batch are kept under it): the
 * SHA-256 of the JSON of what the batch holds, `{"vehicles":[[folder, vehicle, [[name, sha256]…]]…]}`
 * for a fleet and `{"items":[[name, sha256]…], …options}` for photos. Hashed piece by piece, the
 * same bytes as the one JSON string it was before (a state written then still resumes), without
 * that string: a few hundred bytes a photo, all at once.
 */
export function vehiclePlanKey(vehicles: ReadonlyArray<{ folder: string; vehicle: object; photos: ReadonlyArray<{ name: string; sha256: string }> }>): string {
  const hash = createHash('sha256').update('{"vehicles":[');
  vehicles.forEach((v, i) => hash.update(`${i ? ',' : ''}${JSON.stringify([v.folder, v.vehicle, v.photos.map((p) => [p.name, p.sha256])])}`));
  return hash.update(']}').digest('hex');
}

/** The plan of a batch of photos (vehiclePlanKey): `{"items":[[name, sha256]…], …options}`. */
export function photoPlanKey(photos: ReadonlyArray<{ name: string; sha256: string }>, options: object): string {
  const hash = createHash('sha256').update('{"items":[');
  photos.forEach((p, i) => hash.update(`${i ? ',' : ''}${JSON.stringify([p.name, p.sha256])}`));
  const rest = JSON.stringify(options).slice(1, -1);
  return hash.update(`]${rest ? `,${rest}` : ''}}`).digest('hex');
}

/** Bytes as a person reads them: KiB, MiB or GiB. */
export function size(bytes: number): string {
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}

/**
 * A file's name as the batch shows it (status, exports): control characters (a line break in a
 * file name) become U+FFFD, so no export cell or terminal line is split by one, and a name over
 * the API's 500 characters keeps its end (the file's own name) behind an ellipsis.
 */
export function itemName(name: string): string {
  const clean = name.replace(/[\p{Cc}\p{Cf}]/gu, '\uFFFD');
  return clean.length > MAX_NAME ? `…${clean.slice(clean.length - MAX_NAME + 1)}` : clean;
}

function refusalTable(ctx: Context, refused: Array<{ source: string; code: string; message: string }>): string {
  return table(refused.map((r): [string, string] => [itemName(r.source), `${r.code}: ${r.message}`]), '  ', ctx.width);
}

/**
 * A fleet (`--vehicles`): the batch is submitted before the photos are uploaded, naming each
 * photo's upload by the id this command chose for it (kept in the state before anything is sent),
 * with `awaitUploads`; the photos then go up in vehicle order while the batch runs, each vehicle
 * waiting at its turn for its own (docs/decisions.md, "The fleet's analysis overlaps its uploads").
 * One batch, one request id, one export, as before; a rerun resumes the uploads and follows the
 * same batch.
 */
async function runFleet(
  ctx: Context,
  f: {
    vehicles: PlannedVehicle[];
    bySha: Map<string, Hashed>;
    state: BatchState;
    planKey: string;
    format: ExportFormat | undefined;
    output: OutputFile | undefined;
    stack: string | undefined;
    endpoint: string;
    uploadsSummary: { photos: number; distinct: number; uploaded: number; resumed: number; alreadyUploaded: number; bytesSent: number; expired: number };
    uploadMissing: (o?: { fresh?: ReadonlySet<string>; beside?: (done: number, total: number) => void }) => Promise<number>;
  },
): Promise<number> {
  const { bySha, state, planKey, uploadsSummary } = f;
  // Their photos are hashed now (run sets each photo's sha256 on it).
  const vehicles = f.vehicles as HashedVehicle[];
  /** The photos the API refused, each named by its vehicle's folder and its own name. */
  const refusedOf = () => vehicles.flatMap((v) => v.photos.filter((p) => state.refused.has(p.sha256)).map((p) => ({ source: join(v.folder, p.name), ...state.refused.get(p.sha256)! })));
  let batchId = state.batches.get(planKey);
  const fresh = new Set<string>();
  const choose = () => {
    const shas = [...bySha.keys()].filter((sha) => !state.refused.has(sha));
    for (const sha of chooseUploadIds(state, shas).keys()) fresh.add(sha);
  };
  // Photos the API refused in an earlier run: their vehicles are left out, as the API would fail them.
  const refusedPhotos: Array<{ source: string; code: string; message: string }> = [];
  const leftOut: string[] = [];
  const idOf = (sha: string) => state.uploaded.get(sha) ?? state.begun.get(sha)!;
  const buildBody = (): BatchRequest | null => {
    leftOut.length = 0;
    const entries = vehicles.flatMap((v) => {
      const photos = v.photos;
      if (photos.some((p) => state.refused.has(p.sha256))) {
        leftOut.push(v.folder);
        return [];
      }
      return [{ name: itemName(v.folder), ...(Object.keys(v.vehicle).length ? { vehicle: v.vehicle } : {}), items: photos.map((p) => ({ uploadId: idOf(p.sha256), name: itemName(p.name) })) }];
    });
    return entries.length ? { vehicles: entries, awaitUploads: true, ...(f.stack ? { preset: f.stack as BatchRequest['preset'] } : {}) } : null;
  };

  let first: Batch | null = null;
  if (batchId) {
    ctx.stderr.write(`batch ${batchId} was submitted by an earlier run of this command (state in ${state.path}); following it\n`);
  } else {
    // Uploads finished long ago may have expired (UPLOAD_TTL_MS, 24 h unused): asked first, given new ids if gone.
    uploadsSummary.expired = await dropExpired({ state, shas: [...bySha.keys()], endpoint: f.endpoint, apiKey: ctx.apiKey, olderThanMs: ASK_AFTER_MS });
    choose();
    if (!buildBody()) {
      const refused = refusedOf();
      if (ctx.json) printJson(ctx, { batch: null, failed: [], refused, vehiclesLeftOut: leftOut, uploads: uploadsSummary, state: state.path, export: null });
      else print(ctx, `no batch: the API refused every photo\n${refusalTable(ctx, refused)}`);
      return EXIT.API;
    }
    // Those photos get new ids (sent beside the batch) before it is sent under a new request id.
    const created = await submitPlan(ctx, { state, planKey, shas: [...bySha.keys()], idOf: (sha) => state.uploaded.get(sha) ?? state.begun.get(sha), body: () => buildBody()!, uploadsSummary, again: async () => choose() });
    state.record({ batch: { plan: planKey, id: created.id } });
    batchId = created.id;
    first = created;
    ctx.stderr.write(`batch ${created.id} submitted (${created.counts.total} vehicle${created.counts.total === 1 ? '' : 's'}; its photos upload while it runs)\n`);
  }

  // The uploads run beside the batch; a failure of theirs (401, quota, no answer) stops the follow.
  let uploaded = { done: 0, total: bySha.size };
  const stopFollow = new AbortController();
  const uploading = f.uploadMissing({ fresh, beside: (done, total) => (uploaded = { done, total }) }).then(
    (before) => {
      uploadsSummary.alreadyUploaded = before;
    },
    (err: unknown) => {
      stopFollow.abort(err);
      throw err;
    },
  );
  uploading.catch(() => undefined);
  const settle = async () => {
    await uploading;
    refusedPhotos.push(...refusedOf());
  };
  try {
    return await follow(ctx, batchId, first, {
      vehicles: true,
      format: f.format,
      output: f.output,
      refusedPhotos,
      leftOut,
      json: { refused: refusedPhotos, vehiclesLeftOut: leftOut, uploads: uploadsSummary, state: state.path },
      settle,
      note: () => (uploaded.done < uploaded.total ? `uploads ${uploaded.done}/${uploaded.total}` : ''),
      signal: stopFollow.signal,
    });
  } catch (err) {
    // The follow stopped because the uploads failed: theirs is the error to report.
    if (stopFollow.signal.aborted) throw stopFollow.signal.reason;
    throw err;
  }
}

/**
 * Submits a plan's batch under the request id the state keeps for it (written before the request,
 * so a resend after a kill is the same batch). A 404 naming uploads of ours means they expired (or
 * were deleted) since and nothing was made under that id: they are marked expired, `again` makes
 * them good, and the batch goes under a new request id, at most MAX_EXPIRY_ROUNDS times.
 */
async function submitPlan(
  ctx: Context,
  o: {
    state: BatchState;
    planKey: string;
    shas: string[];
    idOf: (sha: string) => string | undefined;
    body: () => BatchRequest;
    uploadsSummary: { expired: number };
    again: () => Promise<void>;
  },
): Promise<Batch> {
  const { state, planKey } = o;
  let requestId = state.submits.get(planKey);
  if (!requestId) {
    requestId = `cli_${randomUUID()}`;
    state.record({ submit: { plan: planKey, requestId } });
  }
  for (let round = 1; ; round++) {
    try {
      return await ctx.client.batches.create(o.body(), { requestId });
    } catch (err) {
      const gone = err instanceof LenstackError && err.status === 404 && round <= MAX_EXPIRY_ROUNDS
        ? o.shas.filter((sha) => {
          const id = o.idOf(sha);
          return id !== undefined && err.message.includes(id);
        })
        : [];
      if (gone.length === 0) throw err;
      for (const sha of gone) state.record({ expired: { sha256: sha } });
      o.uploadsSummary.expired += gone.length;
      ctx.stderr.write(`${gone.length} upload${gone.length === 1 ? '' : 's'} expired before the batch was submitted; uploading again\n`);
      await o.again();
      requestId = `cli_${randomUUID()}`;
      state.record({ submit: { plan: planKey, requestId } });
    }
  }
}
