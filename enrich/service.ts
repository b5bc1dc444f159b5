import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Principal } from '../auth/authenticate.ts';
import type { Config } from '../core/config.ts';
import { AppError, authFailed, imageInvalid, validationFailed } from '../core/errors.ts';
import { release, reserve, settle } from '../credits/ledger.ts';
import { ENRICH_CREDITS } from '../credits/price-book.ts';
import type { Db } from '../db/pool.ts';
import { readInput } from '../images/intake.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import { probeImage, type ImageFormat } from '../images/probe.ts';
import { sandboxPerLens } from '../lenses/fixtures.ts';
import { getLens, type LensName } from '../lenses/index.ts';
import { getPhotos, type LensRecord } from '../registry/photos.ts';
import { IMAGE_DATA_HASH, MetadataFileError, type MetadataTool } from './exiftool.ts';
import { Limiter } from '../core/limiter.ts';
import { ENRICH_FORMATS, isEnrichableLens, planEnrichment, readExisting, type EnrichFormat } from './mapping.ts';

/** Longer than any enrichment can take (fetch 15 s + exiftool 30 s per task); the sweeper frees it after. */
export const ENRICH_RESERVATION_TTL_MS = 5 * 60 * 1000;
/** Concurrent enrichments per process (see enrichLimiter). */
export const ENRICH_CONCURRENCY = 4;
/** Enrichments that may wait for a slot in one process (each holds its image). */
export const ENRICH_QUEUE = 16;

/**
 * The process's bound on enrichments: each holds an image (up to IMAGE_MAX_BYTES), its enriched
 * copy and the base64 answer in memory and keeps an exiftool process busy, and each waiter holds
 * its image too, so the queue is bounded as well: 503 with Retry-After beyond it.
 */
export function enrichLimiter(): Limiter {
  return new Limiter(ENRICH_CONCURRENCY, {
    maxWaiting: ENRICH_QUEUE,
    full: () =>
      new AppError('SERVICE_UNAVAILABLE', 'Too many enrichments are waiting on this server; send the request again in a moment', {
        headers: { 'retry-after': '2' },
      }),
  });
}

/** What svc_test_ keys get written: the fixtures of the lenses with standard-field mappings. */
export const SANDBOX_LENSES: readonly LensName[] = ['describe', 'accessibility', 'dating', 'location', 'people', 'entities'];
const SANDBOX_PRODUCED_AT = '2026-01-01T00:00:00.000Z';

export interface EnrichDeps {
  config: Config;
  db: Db;
  metadata: MetadataTool;
  limiter: Limiter;
  /** Test hook for the image fetcher (as in analyze). */
  fetchPolicy: FetchPolicy;
}

export interface EnrichInput {
  imageUrl?: string | undefined;
  imageBase64?: string | undefined;
  /** The bytes of a finished upload (uploadId), read by the route. */
  imageBytes?: Buffer | undefined;
  formats: readonly EnrichFormat[];
}

export interface EnrichResult {
  /** The enriched file (the original bytes when nothing was written). */
  image: Buffer;
  /** SHA-256 of the original file: the registry key. */
  sha256: string;
  formatsWritten: EnrichFormat[];
  lensVersions: Record<string, string>;
  creditsCharged: number;
}

const EXTENSION: Record<ImageFormat, string> = { jpeg: 'jpg', png: 'png', webp: 'webp', gif: 'gif', tiff: 'tif', avif: 'avif', heif: 'heic', bmp: 'bmp' };

/**
 * POST /v2/enrich: take the image in, find its lens records in the caller's registry (404 before
 * any credit moves), plan the tags, then reserve 5 credits, write, settle. Any failure after the
 * reservation releases it. Sandbox keys write the lens fixtures and bill nothing.
 */
export async function enrichPhoto(deps: EnrichDeps, principal: Principal, input: EnrichInput, requestId: string): Promise<EnrichResult> {
  if (principal.accountId === null) throw authFailed('Enrichment needs an API key that belongs to an account; the anonymous sandbox key has none');
  const accountId = principal.accountId;
  const bytes = await readImage(input, deps);
  const probed = await probeImage(bytes, { maxPixels: deps.config.IMAGE_MAX_PIXELS });
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const formats = ENRICH_FORMATS.filter((f) => input.formats.includes(f));
  const lenses = principal.sandbox ? sandboxRecords() : await registryRecords(deps.db, accountId, sha256);

  return deps.limiter.run(() =>
    inPrivateDir(async (dir) => {
      const file = join(dir, `image.${EXTENSION[probed.format]}`);
      await writeFile(file, bytes, { mode: 0o600 });
      const original = await metadataStep(() => deps.metadata.read(file));
      const existing = readExisting(original);
      const plan = planEnrichment({ lenses, formats, container: probed.format, existing, sha256, now: new Date() });
      const result = { sha256, formatsWritten: plan.formatsWritten, lensVersions: plan.lensVersions };
      // Nothing of these records fits the requested blocks of this container: nothing to bill.
      if (!plan.formatsWritten.length) return { ...result, image: bytes, creditsCharged: 0 };

      const write = async () => {
        if (plan.convertIptcToUtf8) await metadataStep(() => deps.metadata.convertIptcToUtf8(file));
        await metadataStep(() => deps.metadata.write(file, Object.assign({}, ...Object.values(plan.blocks))));
        // exiftool copies image data byte for byte; prove it before anyone is charged. A file
        // whose structure exiftool rewrites (a looping IFD chain is hashed once per visit) fails
        // this for good: the file's fault, not retryable.
        const before = original[IMAGE_DATA_HASH];
        if (before !== undefined && (await metadataStep(() => deps.metadata.read(file)))[IMAGE_DATA_HASH] !== before) {
          throw imageInvalid('Metadata cannot be written to this image without changing its image data; nothing was charged');
        }
        return readFile(file);
      };
      if (principal.sandbox) return { ...result, image: await write(), creditsCharged: 0 };
      const image = await billed(deps.db, { accountId, requestId, sha256, formats }, write);
      return { ...result, image, creditsCharged: ENRICH_CREDITS };
    }),
  );
}

/** The image, read as analyze and lookup read theirs (images/intake.ts). */
async function readImage(input: EnrichInput, deps: EnrichDeps): Promise<Buffer> {
  if (input.imageBytes !== undefined) return readInput({ bytes: input.imageBytes }, { maxBytes: deps.config.IMAGE_MAX_BYTES, fetchPolicy: deps.fetchPolicy });
  if ((input.imageUrl !== undefined) === (input.imageBase64 !== undefined)) throw validationFailed('body: provide exactly one of imageUrl or imageBase64');
  return readInput({ url: input.imageUrl, base64: input.imageBase64 }, { maxBytes: deps.config.IMAGE_MAX_BYTES, fetchPolicy: deps.fetchPolicy });
}

/** The caller's lens records of this photo that enrichment can write; 404 when there are none. */
async function registryRecords(db: Db, accountId: string, sha256: string): Promise<Record<string, LensRecord>> {
  const photo = (await getPhotos(db, accountId, [sha256])).get(sha256);
  const lenses = Object.fromEntries(Object.entries(photo?.lenses ?? {}).filter(([lens]) => isEnrichableLens(lens)));
  if (!Object.keys(lenses).length) {
    throw new AppError(
      'PHOTO_NOT_IN_REGISTRY',
      photo
        ? 'Only moderation has run on this photo: analyze it with at least one lens, then enrich it'
        : `No analysis of this photo (SHA-256 ${sha256}) in your registry: analyze it first (enrichment never runs an analysis)`,
    );
  }
  return lenses;
}

function sandboxRecords(): Record<string, LensRecord> {
  const fixtures = sandboxPerLens(SANDBOX_LENSES);
  return Object.fromEntries(
    Object.entries(fixtures).map(([lens, output]) => [
      lens,
      { eventId: 'evt_sandbox', output: output!, version: getLens(lens as LensName).version, producedAt: SANDBOX_PRODUCED_AT, coRunHash: 'sandbox', provider: 'sandbox' },
    ]),
  );
}

/**
 * Reserve → work → settle, releasing on any failure. The reservation id carries the request id,
 * the photo and the formats: a retry of the same request (same x-request-id) is billed once,
 * while reusing an x-request-id for another photo or other formats is a new charge.
 */
async function billed<T>(
  db: Db,
  call: { accountId: string; requestId: string; sha256: string; formats: EnrichFormat[] },
  work: () => Promise<T>,
): Promise<T> {
  const id = `enrich:${call.accountId}:${call.requestId}:${call.sha256}:${call.formats.join('+')}`;
  const reservation = await reserve(db, { id, accountId: call.accountId, amount: ENRICH_CREDITS, ttlMs: ENRICH_RESERVATION_TTL_MS, reason: 'enrich' });
  if (reservation.status === 'released') {
    throw validationFailed(`x-request-id "${call.requestId}" belongs to an enrichment of this photo that failed and was refunded; send a new x-request-id`);
  }
  let closed = false;
  try {
    const out = await work();
    const settled = await settle(db, { id, charge: ENRICH_CREDITS });
    if (!settled.applied && settled.reservation?.status !== 'settled') {
      // Expired and swept, or a concurrent retry of this request failed and released it.
      throw new AppError('INTERNAL_ERROR', 'The credit hold of this enrichment ended before it finished; nothing was charged, please retry');
    }
    closed = true;
    return out;
  } finally {
    // A release that fails here is done by the sweeper when the hold expires.
    if (!closed) await release(db, { id, reason: 'enrich failed' }).catch(() => undefined);
  }
}

/** exiftool's verdict on the file itself is the image's fault (422); anything else is ours (500). */
async function metadataStep<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof MetadataFileError) throw imageInvalid(`Metadata cannot be written to this image: ${err.message}`);
    throw err;
  }
}

/** A fresh directory only this process can read (mkdtemp: mode 0700), always removed. */
async function inPrivateDir<T>(work: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'lenstack-enrich-'));
  try {
    return await work(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
