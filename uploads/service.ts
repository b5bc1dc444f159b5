import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { FileStore } from '@tus/file-store';
import type { Server } from '@tus/server';
import { EVENTS, Upload, type DataStore } from '@tus/utils';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../core/config.ts';
import { AppError, ERROR_STATUS, validationFailed } from '../core/errors.ts';
import { checkOut, type Db } from '../db/pool.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { BlobStore } from '../images/blobstore.ts';
import { probeImage, type ImageFormat } from '../images/probe.ts';
import { lockBlobs } from '../registry/blob-leases.ts';
import { rowLocker } from './locker.ts';
import { callerOf, metadataValue, mountTus, tusServer, uploadDatastore } from './tus.ts';

/** Where the API's uploads are created (tus 1.0); each lives at UPLOADS_ROUTE/{id}. */
export const UPLOADS_ROUTE = '/v1/uploads';
export const UPLOAD_ID = /^upl_[0-9a-f]{32}$/;
/** Each upload counts at least this much against the quota: a flood of empty uploads is not free. */
export const MIN_CHARGE = 64 * 1024;
/** Uploads one account may hold at once, whatever their sizes (a batch holds 10,000 photos). */
export const MAX_HELD = 20_000;
/** An expired upload's row is kept this long (its bytes are gone), so its id answers "expired", not "no such upload". */
const EXPIRED_ROW_KEPT_MS = 30 * 24 * 3600_000;

/** A finished upload, as requests that name it read it. */
export interface FinishedUpload {
  id: string;
  sha256: string;
  format: ImageFormat;
  width: number;
  height: number;
  size: number;
}

type UploadsConfig = Pick<
  Config,
  'BLOB_STORE' | 'BLOB_DIR' | 'S3_BUCKET' | 'S3_ENDPOINT' | 'S3_REGION' | 'S3_FORCE_PATH_STYLE' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY' |
  'IMAGE_MAX_BYTES' | 'IMAGE_MAX_PIXELS' | 'ACCOUNT_UPLOAD_QUOTA_BYTES' | 'ACCOUNT_UPLOAD_QUOTA_UNPAID_BYTES' | 'UPLOAD_TTL_MS' | 'UPLOAD_MAX_AGE_MS'
>;

/** Who may use the console's door (web/routes/uploads.ts): the signed-in person, and whether they may start batches in a workspace (throws otherwise). */
export interface ConsoleDoor {
  path: string;
  signedIn: (request: FastifyRequest) => Promise<{ id: string }>;
  mayStart: (personId: string, workspaceId: string) => Promise<unknown>;
  /** Bytes of unfinished and untaken uploads one person may hold over all their workspaces that never bought credits (UPLOAD_QUOTA_BYTES). */
  personQuotaBytes: number;
}

export interface Uploads {
  /** Serve the tus protocol at UPLOADS_ROUTE for Bearer keys (the API's auth plugin has run). */
  register(app: FastifyInstance, accountOf: (request: FastifyRequest) => string, schemas?: Parameters<typeof mountTus>[2]['schemas']): void;
  /**
   * Serve the same uploads to the console's pages (session cookie): an upload is made in a
   * workspace the person may start batches in (Upload-Metadata `workspace`) and is that person's
   * alone: anyone else, another admin of the workspace included, gets 404 for it.
   */
  registerConsole(app: FastifyInstance, door: ConsoleDoor): void;
  /**
   * Claim a person's finished console uploads for one batch of the workspace: 400 naming the first
   * that is not one of theirs there, untaken and finished (none stays claimed then). A claim made
   * under a submission's request id may be taken again under the same id: that submission sent
   * again, after its answer was lost or its process died holding the claim.
   */
  claim(workspaceId: string, personId: string, refs: Array<{ id: string; at: string }>, requestId?: string): Promise<void>;
  /**
   * The same checks as `claim`, read-only: 400 naming the first upload `claim` would refuse now.
   * Asked before anything costlier than a query is spent on a submission.
   */
  mayClaim(workspaceId: string, personId: string, refs: Array<{ id: string; at: string }>, requestId?: string): Promise<void>;
  /** Give claimed uploads back (the batch could not be made): those this submission's request id holds. */
  release(ids: string[], requestId?: string): Promise<void>;
  /**
   * The account's finished uploads by id, in the order asked: 404 NOT_FOUND for an id this account
   * does not hold (another account's included), 404 saying so for one that expired,
   * 400 for one not finished. `at` names each id's place in the request for the message.
   */
  resolve(accountId: string, refs: Array<{ id: string; at: string }>): Promise<FinishedUpload[]>;
  /** The bytes of a finished upload (from the blob store, where they are kept once, by SHA-256). */
  bytes(upload: FinishedUpload): Promise<Buffer>;
  /**
   * Uploads used by a billed request that succeeded (analyze, batches, enrich): their expiry starts
   * again, never past UPLOAD_MAX_AGE_MS from creation. The free lookup does not call it.
   */
  touch(accountId: string, ids: string[]): Promise<void>;
  /**
   * An upload made in-process from a stream (a multipart part of POST /v1/analyze): counted against
   * the quota like any other, streamed into the same datastore, finished the same way.
   */
  ingest(accountId: string, stream: Readable, opts: { maxBytes: number }): Promise<FinishedUpload>;
  /**
   * Delete uploads (a multipart request's own, once answered; a batch's, once made); their blobs go
   * to the collector. With `takenBy`, only those claimed under that request id.
   */
  remove(accountId: string, ids: string[], takenBy?: string): Promise<void>;
  /**
   * Expire uploads unused for UPLOAD_TTL_MS or made over UPLOAD_MAX_AGE_MS ago (bytes removed, row
   * kept so the id answers "expired"), and
   * drop rows long expired. Returns how many uploads expired.
   */
  sweep(now?: Date): Promise<number>;
}

/** Our error code for each status tus answers with itself (its HTTP status is kept: tus clients read it). */
const TUS_CODES: Record<number, string> = { 401: 'AUTH_FAILED', 403: 'FORBIDDEN', 404: 'NOT_FOUND', 410: 'NOT_FOUND', 413: 'PAYLOAD_TOO_LARGE', 415: 'UNSUPPORTED_MEDIA_TYPE', 503: 'SERVICE_UNAVAILABLE' };

/** A refusal from inside a tus hook, in the API's error envelope. */
const refusal = (req: Request, code: string, status: number, message: string) => ({
  status_code: status,
  body: JSON.stringify({ error: { code, message, retryable: status === 503, requestId: callerOf<{ requestId?: string }>(req)?.requestId ?? '' } }),
});

/**
 * A hook's failure as tus answers it: the database unreachable is a 503 (Retry-After is added by
 * uploads/tus.ts), as everywhere else in the API (db/unavailable.ts); anything else stays tus's 500.
 */
const hookFailure = (req: Request, err: unknown, refused: (e: AppError) => string): unknown => {
  if (err instanceof AppError) return refusal(req, err.code, err.status, refused(err));
  if (isDatabaseUnavailable(err)) {
    return refusal(req, 'SERVICE_UNAVAILABLE', 503, 'The database is unreachable right now; send the same request again in a moment (HEAD says where the upload stands)');
  }
  return err;
};

/**
 * A person's uploads a submission may claim: theirs in the workspace, not expired, and untaken or
 * taken under the same request id ($1 workspace, $2 person, $3 ids, $4 request id or null).
 */
const CLAIMABLE = 'user_id = $1 AND person_id = $2 AND id = ANY($3) AND expired_at IS NULL AND (taken_at IS NULL OR taken_by = $4)';

/** The submission's upload ids, once each: 400 naming the first named twice. */
function distinctUploads(refs: Array<{ id: string; at: string }>): string[] {
  const ids = [...new Set(refs.map((r) => r.id))];
  if (ids.length !== refs.length) {
    const seen = new Set<string>();
    const twice = refs.find((r) => (seen.has(r.id) ? true : (seen.add(r.id), false)))!;
    throw validationFailed(`${twice.at}: upload ${JSON.stringify(twice.id.slice(0, 100))} is named twice; each photo is uploaded once`);
  }
  return ids;
}

/** The first upload of the submission not among `found`, or undefined. */
const firstMissing = (refs: Array<{ id: string; at: string }>, found: Array<{ id: string }>) => {
  const ok = new Set(found.map((r) => r.id));
  return refs.find((r) => !ok.has(r.id));
};

const notClaimable = (r: { id: string; at: string }) =>
  validationFailed(`${r.at}: no upload ${JSON.stringify(r.id.slice(0, 100))} of yours in this workspace (taken by another batch, expired, or never made)`);

/**
 * Resumable photo uploads over the API (tus 1.0, uploads/tus.ts). An upload belongs to the account
 * that made it and counts against its quota from creation, at its declared size. Finishing one
 * (the last PATCH, in whichever process receives it) reads its bytes once: SHA-256, header probe
 * (format, pixels), then the bytes go into the blob store under their hash — the same photo
 * uploaded twice is stored once — and the datastore's copy is removed.
 */
export function createUploads(deps: {
  db: Db;
  blobs: BlobStore;
  config: UploadsConfig;
  datastore?: DataStore;
  /**
   * Told of uploads that finished or were refused, once that is committed, with the account they
   * are of (batches/upload-waits.ts: that account's vehicle batches waiting for one look again; an
   * id another account chose too is not theirs). Not awaited; must not throw. Required: a process
   * taking uploads that forgot it would leave waiting vehicles to their 30 s backstop.
   */
  onSettled: (accountId: string, ids: string[]) => Promise<void>;
}): Uploads {
  const { db, blobs, config } = deps;
  const settled = (accountId: string, id: string) => void deps.onSettled(accountId, [id]).catch(() => undefined);
  const store = deps.datastore ?? uploadDatastore(config, config.UPLOAD_TTL_MS);
  if (store instanceof FileStore) mkdirSync((store as unknown as { directory: string }).directory, { recursive: true });

  /**
   * The quota check and the row are one statement per account at a time (advisory lock). A console
   * upload to a workspace that never bought credits also counts against its person's own quota, over
   * all their such workspaces (their lock first).
   */
  async function reserve(accountId: string, id: string, size: number, person?: { id: string; quotaBytes: number }): Promise<void> {
    const { client: c, release } = await checkOut(db);
    try {
      await c.query('BEGIN');
      // An account that never bought credits gets the small quota (docs/decisions.md, "No storage without payment").
      // purchased_granted only grows, so it is read before the locks.
      const paid = Boolean((await c.query<{ paid: boolean }>('SELECT purchased_granted > 0 AS paid FROM credit_accounts WHERE user_id = $1', [accountId])).rows[0]?.paid);
      // The person's own quota holds in workspaces that never paid: it keeps one person from
      // multiplying free storage over many free workspaces. A workspace that paid holds a fleet up to
      // its account quota, whoever of its admins uploads it (docs/decisions.md, "A console fleet
      // in a workspace that paid").
      if (person && !paid) {
        await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`console-uploads:${person.id}`]);
        const mine = await c.query<{ n: string }>(
          `SELECT coalesce(sum(greatest(u.size, $2)), 0)::text AS n FROM uploads u
            WHERE u.person_id = $1 AND u.expired_at IS NULL AND u.taken_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM credit_accounts a WHERE a.user_id = u.user_id AND a.purchased_granted > 0)`,
          [person.id, MIN_CHARGE],
        );
        if (Number(mine.rows[0]!.n) + Math.max(size, MIN_CHARGE) > person.quotaBytes) {
          throw new AppError(
            'PAYLOAD_TOO_LARGE',
            `Your unfinished and untaken uploads in workspaces that have not bought credits would pass ${Math.round(person.quotaBytes / 1024 ** 2)} MiB: start a batch with the finished ones first (a workspace that has bought credits takes a whole fleet)`,
          );
        }
      }
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`api-uploads:${accountId}`]);
      const used = await c.query<{ n: string; held: number }>(
        'SELECT coalesce(sum(greatest(size, $2)), 0)::text AS n, count(*)::int AS held FROM uploads WHERE user_id = $1 AND expired_at IS NULL',
        [accountId, MIN_CHARGE],
      );
      const quota = paid ? config.ACCOUNT_UPLOAD_QUOTA_BYTES : Math.min(config.ACCOUNT_UPLOAD_QUOTA_UNPAID_BYTES, config.ACCOUNT_UPLOAD_QUOTA_BYTES);
      if (Number(used.rows[0]!.n) + Math.max(size, MIN_CHARGE) > quota || used.rows[0]!.held >= MAX_HELD) {
        throw new AppError(
          'PAYLOAD_TOO_LARGE',
          `Your uploads would pass this account's upload quota (${Math.round(quota / 1024 ** 2)} MiB or ${MAX_HELD} uploads${paid ? '' : '; an account that has bought credits gets more'}): use the finished ones in a request (a batch takes up to 10,000 photos), delete the ones you no longer need (DELETE ${UPLOADS_ROUTE}/{id}), or wait for unused ones to expire`,
        );
      }
      // An id the client chose (Upload-Metadata uploadId) may be taken: a collision changes nothing.
      const made = await c.query('INSERT INTO uploads (id, user_id, size, person_id) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING', [id, accountId, size, person?.id ?? null]);
      if (made.rowCount === 0) {
        // The same account's creation of this id cut off before its datastore entry was made (HEAD
        // answered 404): this one takes the row over. Any other holder keeps it.
        const held = (await c.query<{ user_id: string; sha256: string | null; expired_at: Date | null }>('SELECT user_id, sha256, expired_at FROM uploads WHERE id = $1', [id])).rows[0];
        const stored = await store.getUpload(id).then(() => true, () => false);
        if (!held || held.user_id !== accountId || held.sha256 !== null || held.expired_at !== null || stored) {
          throw validationFailed(`Upload-Metadata: uploadId ${id} is taken; choose another (or HEAD ${UPLOADS_ROUTE}/${id} to resume it)`);
        }
        await c.query('UPDATE uploads SET size = $2, created_at = now(), last_used_at = now() WHERE id = $1', [id, size]);
      }
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      release();
    }
  }

  /**
   * The upload's bytes, refused past `max`. With the size the row expects, they are copied into one
   * buffer of that size as they stream (no list of chunks to concatenate: the fleet's API CPU,
   * bench/README.md "Where the CPU goes"); a file longer than expected falls back to the list.
   */
  async function readAll(id: string, max: number, expected?: number): Promise<Buffer> {
    const stream = await (store as unknown as { read(id: string): Readable | Promise<Readable> }).read(id);
    let into = expected !== undefined && expected > 0 && expected <= max ? Buffer.allocUnsafe(expected) : null;
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const chunk of stream) {
      const bytes = chunk as Buffer;
      if (n + bytes.length > max) {
        stream.destroy();
        throw new AppError('IMAGE_TOO_LARGE', `The upload is over the ${max}-byte image limit`);
      }
      if (into && n + bytes.length <= into.length) bytes.copy(into, n);
      else {
        if (into) chunks.push(into.subarray(0, n));
        into = null;
        chunks.push(bytes);
      }
      n += bytes.length;
    }
    return into ? into.subarray(0, n) : Buffer.concat(chunks, n);
  }

  /**
   * Hash, probe and store a complete upload, once. A file that is not an image we accept is
   * refused here (422), its row and bytes deleted: nothing can be done with it. The row is locked
   * (FOR UPDATE) while it is finished, so a resolve that finds the last byte arrived but no hash yet
   * while onUploadFinish is still at work waits for it and returns its result, rather than reading
   * bytes that are gone by then (docs/reliability.md).
   */
  async function complete(id: string, opts: { keepCopy?: boolean } = {}): Promise<FinishedUpload> {
    // Guarded: the connection may be lost while the bytes are read (checkOut, db/pool.ts).
    const { client: c, release } = await checkOut(db);
    let removeAfter = false;
    try {
      await c.query('BEGIN');
      const locked = await c.query<Row>('SELECT id, user_id, size::text, sha256, format, width, height, expired_at, false AS too_old FROM uploads WHERE id = $1 FOR UPDATE', [id]);
      const row = locked.rows[0];
      if (!row) throw new AppError('NOT_FOUND', `Upload ${id} was refused or deleted while it was finishing`);
      if (row.sha256 !== null) {
        // Another process finished it while this one waited for the lock.
        await c.query('COMMIT');
        return finishedOf(row);
      }
      let bytes: Buffer;
      let probed: Awaited<ReturnType<typeof probeImage>>;
      try {
        bytes = await readAll(id, config.IMAGE_MAX_BYTES, Number(row.size));
        probed = await probeImage(bytes, { maxPixels: config.IMAGE_MAX_PIXELS, decode: false });
      } catch (err) {
        if (err instanceof AppError && err.status < 500) {
          await c.query('DELETE FROM uploads WHERE id = $1', [id]);
          // Kept apart, so a batch awaiting this upload learns why it will never finish.
          await c.query('INSERT INTO refused_uploads (id, user_id, code, message) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING', [id, row.user_id, err.code, err.message]);
          await c.query('COMMIT');
          settled(row.user_id, id);
          await store.remove(id).catch(() => undefined);
        }
        throw err;
      }
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      // The row names the hash before the blob is written (in this transaction; the blob collector's
      // grace covers the moment until it commits): the collector never takes the blob unnamed, and
      // whoever waits on the lock finds the blob there. The blob's own lock, held until the commit,
      // keeps another request's clean-up from deleting bytes this put found stored before the row
      // naming them is visible (registry/blob-leases.ts).
      await lockBlobs(c, [sha256]);
      await c.query(
        'UPDATE uploads SET sha256 = $2, format = $3, width = $4, height = $5, finished_at = now(), last_used_at = now() WHERE id = $1',
        [id, sha256, probed.format, probed.width, probed.height],
      );
      // An erasure of these bytes at this moment waits on the blob's lock, then finds the committed row keeping them.
      // Hashed just above from these bytes: the store need not hash them again to check the key.
      await blobs.put(sha256, bytes, { verified: true });
      await c.query('COMMIT');
      settled(row.user_id, id);
      removeAfter = true;
      return { id, sha256, format: probed.format, width: probed.width, height: probed.height, size: Number(row.size) };
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      release();
      if (removeAfter && !opts.keepCopy) await store.remove(id).catch(() => undefined);
    }
  }

  type Row = { id: string; user_id: string; size: string; sha256: string | null; format: ImageFormat | null; width: number | null; height: number | null; expired_at: Date | null; too_old: boolean };
  /** `too_old`: past UPLOAD_MAX_AGE_MS from creation; it answers as expired even before the collector marks it. */
  const rowsOf = async (ids: string[]) =>
    new Map(
      (await db.query<Row>(
        'SELECT id, user_id, size::text, sha256, format, width, height, expired_at, created_at < now() - make_interval(secs => $2) AS too_old FROM uploads WHERE id = ANY($1)',
        [ids, config.UPLOAD_MAX_AGE_MS / 1000],
      )).rows.map((r) => [r.id, r]),
    );
  const expiredSaying = `unused for ${config.UPLOAD_TTL_MS / 3600_000} h, or made over ${config.UPLOAD_MAX_AGE_MS / 3600_000} h ago`;
  const finishedOf = (r: Row): FinishedUpload => ({ id: r.id, sha256: r.sha256!, format: r.format!, width: r.width!, height: r.height!, size: Number(r.size) });

  type Caller = { accountId: string; requestId?: string; person?: { id: string; quotaBytes: number }; created?: string };
  /** One tus server per door (its path makes its Locations); the datastore and the hooks are shared. */
  // One lock per upload across processes (uploads/locker.ts), shared by both doors.
  const locker = rowLocker(db);
  /** The datastore's copy of an upload finished in its POST goes once the POST is answered. */
  const withCopiesRemoved = (server: Server): Server => {
    server.on(EVENTS.POST_FINISH, (_req, _res, upload) => void store.remove(upload.id).catch(() => undefined));
    return server;
  };
  const serverAt = (route: string): Server => withCopiesRemoved(tusServer({
    path: route,
    datastore: store,
    locker,
    maxSize: config.IMAGE_MAX_BYTES,
    // The client may name the upload (Upload-Metadata `uploadId`, upl_ and 32 hex): it then knows
    // the URL before its POST is answered, so a creation-with-upload cut mid-body resumes from HEAD
    // (docs/decisions.md, "The fleet's analysis overlaps its uploads").
    // A requested id not of that shape is refused (400), not replaced by one the API makes: the
    // client would record, resume and name in its batch an upload that does not exist.
    namingFunction: (req, metadata) => {
      const chosen = metadata?.uploadId;
      if (chosen === undefined) return `upl_${randomBytes(16).toString('hex')}`;
      if (typeof chosen === 'string' && UPLOAD_ID.test(chosen)) return chosen;
      throw refusal(req, 'VALIDATION_FAILED', 400, `Upload-Metadata: uploadId ${JSON.stringify((chosen ?? '').slice(0, 100))} must be upl_ and 32 lowercase hex digits; leave it out to have the API choose one`);
    },
    async onUploadCreate(req, upload) {
      const caller = callerOf<Caller>(req);
      if (!caller) throw refusal(req, 'AUTH_FAILED', 401, 'Missing or invalid API key');
      if (upload.size === undefined) throw refusal(req, 'VALIDATION_FAILED', 400, 'Upload-Length is required: say the file size up front');
      try {
        await reserve(caller.accountId, upload.id, upload.size, caller.person);
      } catch (err) {
        throw hookFailure(req, err, (e) => e.message);
      }
      caller.created = upload.id;
      return {};
    },
    async onUploadFinish(req, upload) {
      try {
        // A creation-with-upload finished in its POST: tus reads the datastore's entry once more
        // before it answers (Upload-Expires), so the copy goes after the answer (POST_FINISH below).
        await complete(upload.id, { keepCopy: req.method === 'POST' });
      } catch (err) {
        throw hookFailure(req, err, (e) => `The upload was refused and deleted: ${e.message}`);
      }
      return {};
    },
    // A creation that failed after its row was written gives its quota back at once, unless bytes
    // of its body arrived (creation-with-upload cut off): the client resumes it from HEAD.
    async onResponseError(req) {
      const created = req.method === 'POST' ? callerOf<{ created?: string }>(req)?.created : undefined;
      if (!created) return undefined;
      const held = await store.getUpload(created).catch(() => null);
      if (held && held.offset > 0) return undefined;
      await db.query('DELETE FROM uploads WHERE id = $1 AND sha256 IS NULL', [created]);
      return undefined;
    },
  }));
  const tus = serverAt(UPLOADS_ROUTE);

  /** tus's own refusals (no Tus-Resumable, a malformed header, an offset mismatch …) in the envelope, on `route`. */
  const errorBodyAt = (route: string) => (status: number, message: string, requestId: string) => {
    const code = TUS_CODES[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : 'VALIDATION_FAILED');
    // Each answers with its code's status, except the tus statuses a tus client acts on (409
    // offset mismatch, 460 checksum mismatch), which keep theirs.
    const kept = status === 409 || status === 460;
    return {
      status: kept ? status : ERROR_STATUS[code as keyof typeof ERROR_STATUS],
      body: JSON.stringify({ error: { code, message: `${message} (tus 1.0: ${route})`, retryable: status === 503, requestId } }),
    };
  };

  /**
   * What every door does for an existing upload once it knows whose it is: termination (the row
   * first, so its quota is free when the answer arrives, then the datastore's bytes; a finished
   * upload's blob is the collector's), and HEAD/PATCH of a finished one answered here (its bytes are
   * in the blob store now). True when it answered.
   */
  async function answeredForExisting(request: FastifyRequest, reply: FastifyReply, row: Row): Promise<boolean> {
    if (request.method === 'DELETE') {
      await db.query('DELETE FROM uploads WHERE id = $1', [row.id]);
      if (row.sha256 === null) await store.remove(row.id).catch(() => undefined);
      reply.header('tus-resumable', '1.0.0').code(204).send();
      return true;
    }
    if (row.sha256 !== null) {
      reply.header('tus-resumable', '1.0.0').header('cache-control', 'no-store');
      if (request.method === 'HEAD') {
        reply.header('upload-offset', row.size).header('upload-length', row.size).code(200).send();
      } else {
        throw new AppError('VALIDATION_FAILED', `Upload ${row.id} is finished: nothing more can be appended`);
      }
      return true;
    }
    return false;
  }

  return {
    register(app, accountOf, schemas) {
      mountTus(app, tus, {
        ...(schemas ? { schemas } : {}),
        errorBody: errorBodyAt(UPLOADS_ROUTE),
        path: UPLOADS_ROUTE,
        routeConfig: { auth: 'key' },
        async authorize(request: FastifyRequest, reply: FastifyReply, id: string | null) {
          const accountId = accountOf(request);
          if (id === null) return { accountId, requestId: request.id };
          if (!UPLOAD_ID.test(id)) throw new AppError('NOT_FOUND', 'No such upload');
          const row = (await rowsOf([id])).get(id);
          if (!row || row.user_id !== accountId) throw new AppError('NOT_FOUND', `No upload ${id} for this account`);
          if (row.expired_at || row.too_old) throw new AppError('NOT_FOUND', `Upload ${id} expired (${expiredSaying}): upload the photo again`);
          if (await answeredForExisting(request, reply, row)) return null;
          return { accountId, requestId: request.id };
        },
      });
    },

    registerConsole(app, door) {
      const server = serverAt(door.path);
      mountTus(app, server, {
        errorBody: errorBodyAt(door.path),
        path: door.path,
        async authorize(request: FastifyRequest, reply: FastifyReply, id: string | null) {
          const person = await door.signedIn(request);
          // tus reads the id from the URL its own way: a second id hidden in the query string must not slip through.
          if (request.url.includes('?')) throw new AppError('NOT_FOUND', 'No such upload');
          if (id === null) {
            const workspaceId = metadataValue(request.headers['upload-metadata'] as string | undefined, 'workspace');
            if (!workspaceId || !/^usr_[A-Za-z0-9_-]{1,80}$/.test(workspaceId)) throw validationFailed('Upload-Metadata: workspace is required');
            await door.mayStart(person.id, workspaceId);
            return { accountId: workspaceId, requestId: request.id, person: { id: person.id, quotaBytes: door.personQuotaBytes } };
          }
          // An upload is its maker's: another person, another admin of the same workspace included,
          // cannot read its offset, write into it or end it (404, as for anyone else).
          const row = UPLOAD_ID.test(id) ? (await db.query<Row & { person_id: string | null; taken_at: Date | null }>(
            'SELECT id, user_id, person_id, taken_at, size::text, sha256, format, width, height, expired_at, created_at < now() - make_interval(secs => $2) AS too_old FROM uploads WHERE id = $1',
            [id, config.UPLOAD_MAX_AGE_MS / 1000],
          )).rows[0] : undefined;
          if (!row || row.person_id !== person.id) throw new AppError('NOT_FOUND', 'No such upload');
          await door.mayStart(person.id, row.user_id);
          if (row.expired_at || row.too_old) throw new AppError('NOT_FOUND', `Upload ${id} expired (${expiredSaying}): upload the photo again`);
          if (row.taken_at && request.method === 'DELETE') throw new AppError('VALIDATION_FAILED', `Upload ${id} is being taken by a batch`);
          if (await answeredForExisting(request, reply, row)) return null;
          return { accountId: row.user_id, requestId: request.id, person: { id: person.id, quotaBytes: door.personQuotaBytes } };
        },
      });
    },

    async claim(workspaceId, personId, refs, requestId) {
      const claimed = await db.query<{ id: string }>(
        `UPDATE uploads SET taken_at = now(), taken_by = $4 WHERE ${CLAIMABLE} RETURNING id`,
        [workspaceId, personId, distinctUploads(refs), requestId ?? null],
      );
      const missing = firstMissing(refs, claimed.rows);
      if (missing) {
        await this.release(claimed.rows.map((r) => r.id), requestId);
        throw notClaimable(missing);
      }
    },

    async mayClaim(workspaceId, personId, refs, requestId) {
      const open = await db.query<{ id: string }>(`SELECT id FROM uploads WHERE ${CLAIMABLE}`, [workspaceId, personId, distinctUploads(refs), requestId ?? null]);
      const missing = firstMissing(refs, open.rows);
      if (missing) throw notClaimable(missing);
    },

    async release(ids, requestId) {
      if (ids.length) await db.query('UPDATE uploads SET taken_at = NULL, taken_by = NULL WHERE id = ANY($1) AND taken_by IS NOT DISTINCT FROM $2', [ids, requestId ?? null]);
    },

    async resolve(accountId, refs) {
      const rows = await rowsOf([...new Set(refs.map((r) => r.id))]);
      const out: FinishedUpload[] = [];
      for (const { id, at } of refs) {
        let row = rows.get(id);
        if (!row || row.user_id !== accountId) throw new AppError('NOT_FOUND', `${at}: no upload ${JSON.stringify(id.slice(0, 100))} for this account (POST ${UPLOADS_ROUTE} makes one)`);
        if (row.expired_at || row.too_old) throw new AppError('NOT_FOUND', `${at}: upload ${id} expired (${expiredSaying}); upload the photo again`);
        if (row.sha256 === null) {
          // Every byte arrived but the process finishing it stopped before it was recorded: finish it now.
          const held = await store.getUpload(id).catch(() => null);
          if (!held || held.size === undefined || held.offset !== held.size) {
            throw validationFailed(`${at}: upload ${id} has not finished (${held?.offset ?? 0} of ${row.size} bytes); resume it with HEAD and PATCH ${UPLOADS_ROUTE}/${id}`);
          }
          const done = await complete(id);
          row = { ...row, sha256: done.sha256, format: done.format, width: done.width, height: done.height };
          rows.set(id, row);
        }
        out.push(finishedOf(row));
      }
      return out;
    },

    bytes(upload) {
      return blobs.get(upload.sha256);
    },

    async touch(accountId, ids) {
      if (ids.length) await db.query('UPDATE uploads SET last_used_at = now() WHERE user_id = $1 AND id = ANY($2) AND expired_at IS NULL', [accountId, ids]);
    },

    async ingest(accountId, stream, opts) {
      const id = `upl_${randomBytes(16).toString('hex')}`;
      // The size is not known before the part is read: the quota counts the image limit meanwhile.
      await reserve(accountId, id, opts.maxBytes);
      try {
        // Created with its length deferred and declared once read: @tus/s3-store completes the S3
        // multipart upload only when the offset reaches the declared size, so a size declared up
        // front (the image limit) left it incomplete and unreadable (docs/reliability.md).
        await store.create(new Upload({ id, offset: 0, size: undefined, metadata: {} }));
        // Counted on the way: a part over the image limit stops the write there.
        let n = 0;
        const counted = new Transform({
          transform(chunk: Buffer, _enc, done) {
            n += chunk.length;
            if (n > opts.maxBytes) done(new AppError('IMAGE_TOO_LARGE', `A photo part is over the ${opts.maxBytes}-byte image limit`));
            else done(null, chunk);
          },
        });
        stream.on('error', (err) => counted.destroy(err));
        const written = await store.write(stream.pipe(counted), id, 0);
        if (n > opts.maxBytes) throw new AppError('IMAGE_TOO_LARGE', `A photo part is over the ${opts.maxBytes}-byte image limit`);
        if (written === 0) throw new AppError('IMAGE_INVALID', 'A photo part is empty');
        await store.declareUploadLength(id, written);
        // An empty write at the end: the store sees offset == length and finishes the upload.
        await store.write(Readable.from([]), id, written);
        await db.query('UPDATE uploads SET size = $2 WHERE id = $1', [id, written]);
        return await complete(id);
      } catch (err) {
        await db.query('DELETE FROM uploads WHERE id = $1', [id]);
        await store.remove(id).catch(() => undefined);
        throw err;
      }
    },

    async remove(accountId, ids, takenBy) {
      if (ids.length) await db.query('DELETE FROM uploads WHERE user_id = $1 AND id = ANY($2) AND ($3::text IS NULL OR taken_by = $3)', [accountId, ids, takenBy ?? null]);
    },

    async sweep(now = new Date()) {
      const expired = await db.query<{ id: string; sha256: string | null }>(
        `UPDATE uploads SET expired_at = $1 WHERE expired_at IS NULL
           AND (last_used_at < $1::timestamptz - make_interval(secs => $2) OR created_at < $1::timestamptz - make_interval(secs => $3))
         RETURNING id, sha256`,
        [now, config.UPLOAD_TTL_MS / 1000, config.UPLOAD_MAX_AGE_MS / 1000],
      );
      // Unfinished ones still have bytes in the datastore; finished ones' blobs go to the blob collector.
      for (const r of expired.rows) if (r.sha256 === null) await store.remove(r.id).catch(() => undefined);
      await db.query(`DELETE FROM uploads WHERE expired_at < $1::timestamptz - make_interval(secs => $2)`, [now, EXPIRED_ROW_KEPT_MS / 1000]);
      await db.query(`DELETE FROM refused_uploads WHERE refused_at < $1::timestamptz - make_interval(secs => $2)`, [now, EXPIRED_ROW_KEPT_MS / 1000]);
      // Waits a batch workflow did not end itself (it was terminated): far past any wait's deadline.
      await db.query(`DELETE FROM upload_waits WHERE since < $1::timestamptz - interval '1 day'`, [now]);
      await store.deleteExpired().catch(() => 0);
      return expired.rows.length;
    },
  };
}

export type AwaitedUpload = { finished: FinishedUpload } | { arriving: true } | { gone: { code: string; message: string } };

/**
 * Where uploads a vehicle batch awaits stand (docs/decisions.md, "The fleet's analysis overlaps its
 * uploads"), by id: finished (its bytes are in the blob store), still arriving (not made yet, or not
 * every byte in), or gone for good (another account's, expired, refused when it finished). Read at
 * submission and by the worker at the vehicle's turn (activities/batch.ts).
 */
export async function awaitedUploads(db: Db, accountId: string, ids: string[]): Promise<Map<string, AwaitedUpload>> {
  type R = { id: string; user_id: string; size: string; sha256: string | null; format: ImageFormat | null; width: number | null; height: number | null; expired_at: Date | null };
  const rows = new Map((await db.query<R>('SELECT id, user_id, size::text, sha256, format, width, height, expired_at FROM uploads WHERE id = ANY($1)', [ids])).rows.map((r) => [r.id, r]));
  const missing = ids.filter((id) => !rows.has(id));
  const refused = new Map(missing.length
    ? (await db.query<{ id: string; code: string; message: string }>('SELECT id, code, message FROM refused_uploads WHERE id = ANY($1) AND user_id = $2', [missing, accountId])).rows.map((r) => [r.id, r])
    : []);
  const out = new Map<string, AwaitedUpload>();
  for (const id of ids) {
    const row = rows.get(id);
    if (!row) {
      const r = refused.get(id);
      out.set(id, r ? { gone: { code: r.code, message: `upload ${id} was refused: ${r.message}` } } : { arriving: true });
    } else if (row.user_id !== accountId) out.set(id, { gone: { code: 'NOT_FOUND', message: `no upload ${id} for this account` } });
    else if (row.expired_at) out.set(id, { gone: { code: 'NOT_FOUND', message: `upload ${id} expired; upload the photo again` } });
    else if (row.sha256 === null) out.set(id, { arriving: true });
    else out.set(id, { finished: { id, sha256: row.sha256, format: row.format!, width: row.width!, height: row.height!, size: Number(row.size) } });
  }
  return out;
}
