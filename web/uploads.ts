import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { FileStore } from '@tus/file-store';
import { EVENTS } from '@tus/server';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { callerOf as tusCallerOf, metadataValue, mountTus, tusServer } from '../uploads/tus.ts';
import type { UploadedPhoto } from '../batches/submit.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';

/** Where uploads are created; each upload lives at UPLOADS_PATH/{id}. */
export const UPLOADS_PATH = '/api/v1/uploads';
/** How long an upload that no batch took is kept (a dropped upload can resume within it). */
export const UPLOAD_TTL_MS = 24 * 3600_000;
/** The signed-in person of a request handed to tus (the shared glue of uploads/tus.ts). */
const callerOf = (req: Request) => tusCallerOf<{ person: string; workspace: string; created?: string }>(req);
/** Each upload counts at least this much against the quota: a flood of empty uploads is not free. */
const MIN_CHARGE = 256 * 1024;
/** Untaken uploads one person may hold, whatever their sizes (a batch holds at most 10,000). */
const MAX_HELD = 10_000;
const ID = /^(usr_[A-Za-z0-9_-]{1,80})\.([0-9a-f]{32})$/;
/**
 * A file no row names is removed once it is this old: its row went with its person or workspace
 * (a cascade), or its creation failed half-way. Younger ones may be a creation still under way.
 */
export const ORPHAN_GRACE_MS = 3600_000;

export interface Uploads {
  /** The directory the files are in (each at {dir}/{id}). */
  readonly dir: string;
  /**
   * Serve the tus protocol for a signed-in person (POST creates, HEAD asks the offset, PATCH
   * appends) who may start batches in the upload's workspace (`mayStart` throws otherwise).
   */
  register(app: FastifyInstance, signedIn: (request: FastifyRequest) => Promise<{ id: string }>, mayStart: (personId: string, workspaceId: string) => Promise<unknown>): void;
  /**
   * Claim the workspace's finished uploads for one batch, as photos (only the person's own); 400
   * naming the first that is not one (none stays claimed then). A claimed upload cannot be taken by a second submission.
   */
  take(workspaceId: string, uploads: Array<{ id: string; name: string }>, personId: string): Promise<UploadedPhoto[]>;
  /** Give claimed uploads back (the batch could not be made). */
  release(ids: string[]): Promise<void>;
  /** Forget uploads a batch took (their bytes are in the blob store now). */
  forget(ids: string[]): Promise<void>;
  /**
   * Delete uploads older than UPLOAD_TTL_MS (finished or not), and files no row names any more
   * once they are ORPHAN_GRACE_MS old. Returns how many uploads went.
   */
  sweep(): Promise<number>;
}

/**
 * Resumable batch uploads from the console, by the tus protocol (@tus/server, files on local disk
 * until a batch takes them). An upload belongs to a workspace (its id starts with the workspace's)
 * and counts against its uploader's quota from creation, at its declared size, so neither finished
 * nor abandoned uploads can fill the disk; each file may be at most the image size limit.
 */
export function createUploads(deps: { db: Db; dir: string; maxBytes: number; quotaBytes: number }): Uploads {
  mkdirSync(deps.dir, { recursive: true });
  const store = new FileStore({ directory: deps.dir, expirationPeriodInMilliseconds: UPLOAD_TTL_MS });
  // The product's one tus server (uploads/tus.ts): relative Locations, no cross-origin access (only
  // the console's own pages call this, same origin).
  const tus = tusServer({
    path: UPLOADS_PATH,
    datastore: store,
    maxSize: deps.maxBytes,
    namingFunction: (_req, metadata) => `${metadata?.workspace ?? ''}.${randomBytes(16).toString('hex')}`,
    // The upload tus acts on must be the one the route authorized (tus reads the id from the URL
    // its own way; a second id hidden in the query string must not slip through).
    async onIncomingRequest(req, id) {
      const caller = callerOf(req);
      if (!caller) throw { status_code: 401, body: 'Sign in first' };
      if (req.method !== 'POST' && !id.startsWith(`${caller.workspace}.`)) throw { status_code: 404, body: 'No such upload' };
    },
    async onUploadCreate(req, upload) {
      const caller = callerOf(req);
      const person = caller?.person;
      const workspace = upload.metadata?.workspace ?? '';
      if (!person) throw { status_code: 401, body: 'Sign in first' };
      if (upload.size === undefined) throw { status_code: 400, body: 'Upload-Length is required: say the file size up front' };
      // The quota check and the row are one statement per person at a time (advisory lock), so
      // parallel creations cannot each see room that only one of them has.
      const c = await deps.db.connect();
      try {
        await c.query('BEGIN');
        await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`uploads:${person}`]);
        const used = await c.query<{ n: string; held: number }>(
          'SELECT coalesce(sum(greatest(size, $2)), 0)::text AS n, count(*)::int AS held FROM console_uploads WHERE person_id = $1',
          [person, MIN_CHARGE],
        );
        if (Number(used.rows[0]!.n) + Math.max(upload.size, MIN_CHARGE) > deps.quotaBytes || used.rows[0]!.held >= MAX_HELD) {
          await c.query('ROLLBACK');
          throw { status_code: 413, body: `Your unfinished and untaken uploads would pass ${Math.round(deps.quotaBytes / 1024 ** 2)} MiB: start a batch with the finished ones first` };
        }
        await c.query('INSERT INTO console_uploads (id, workspace_id, person_id, size) VALUES ($1, $2, $3, $4)', [upload.id, workspace, person, upload.size]);
        await c.query('COMMIT');
        caller!.created = upload.id;
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        c.release();
      }
      return {};
    },
    // A creation that failed after its row was written (the store could not make the file) gives
    // its quota back at once, not after the sweep.
    async onResponseError(req) {
      const created = req.method === 'POST' ? callerOf(req)?.created : undefined;
      if (created) await forgetRows([created]);
      return undefined;
    },
  });
  // An upload its owner terminated (tus DELETE) no longer counts.
  tus.on(EVENTS.POST_TERMINATE, (_req: Request, _res: Response, id: string) => void forgetRows([id]).catch(() => undefined));
  const forgetRows = (ids: string[]) => deps.db.query('DELETE FROM console_uploads WHERE id = ANY($1)', [ids]);

  return {
    dir: deps.dir,
    register(app, signedIn, mayStart) {
      mountTus(app, tus, {
        path: UPLOADS_PATH,
        async authorize(request: FastifyRequest, _reply, id) {
          const person = await signedIn(request);
          if (request.url.includes('?')) throw new AppError('NOT_FOUND', 'No such upload');
          let workspaceId: string | null;
          if (id === null) {
            workspaceId = metadataValue(request.headers['upload-metadata'] as string | undefined, 'workspace');
            if (!workspaceId || !/^usr_[A-Za-z0-9_-]{1,80}$/.test(workspaceId)) throw validationFailed('Upload-Metadata: workspace is required');
          } else {
            workspaceId = ID.exec(id)?.[1] ?? null;
            if (!workspaceId) throw new AppError('NOT_FOUND', 'No such upload');
            // An upload is its creator's: another admin of the same workspace cannot read its
            // offset, write into it or end it (404, as for anyone else).
            const creator = await deps.db.query<{ person_id: string }>('SELECT person_id FROM console_uploads WHERE id = $1', [id]);
            if (creator.rows[0]?.person_id !== person.id) throw new AppError('NOT_FOUND', 'No such upload');
          }
          await mayStart(person.id, workspaceId);
          return { person: person.id, workspace: workspaceId };
        },
      });
    },

    async take(workspaceId, uploads, personId) {
      const ids = uploads.map((u) => u.id);
      const claimed = await deps.db.query<{ id: string }>(
        'UPDATE console_uploads SET taken_at = now() WHERE workspace_id = $1 AND id = ANY($2) AND person_id = $3 AND taken_at IS NULL RETURNING id',
        [workspaceId, ids, personId],
      );
      const mine = new Set(claimed.rows.map((r) => r.id));
      try {
        const photos: UploadedPhoto[] = [];
        for (const [i, u] of uploads.entries()) {
          if (!mine.has(u.id) || !ID.test(u.id)) throw validationFailed(`uploads.${i}: no upload ${JSON.stringify(u.id.slice(0, 100))} of yours in this workspace (taken by another batch, expired, or never made)`);
          mine.delete(u.id); // a repeated id is refused by the check above the second time
          const upload = await store.getUpload(u.id).catch(() => null);
          if (!upload || upload.size === undefined || upload.offset !== upload.size) throw validationFailed(`uploads.${i}: ${u.name} has not finished uploading`);
          photos.push({ name: u.name, read: () => readFile(path.join(deps.dir, u.id)) });
        }
        return photos;
      } catch (err) {
        await this.release(claimed.rows.map((r) => r.id));
        throw err;
      }
    },

    async release(ids) {
      await deps.db.query('UPDATE console_uploads SET taken_at = NULL WHERE id = ANY($1)', [ids]);
    },

    async forget(ids) {
      await Promise.all(ids.map((id) => store.remove(id).catch(() => undefined)));
      await forgetRows(ids);
    },

    async sweep() {
      const old = await deps.db.query<{ id: string }>(`SELECT id FROM console_uploads WHERE created_at < now() - make_interval(secs => $1)`, [UPLOAD_TTL_MS / 1000]);
      await this.forget(old.rows.map((r) => r.id));
      // Files whose row is gone: a person or workspace deleted took the rows with it (a cascade
      // cannot reach the disk), or a creation failed half-way. tus's own expiry only removes
      // unfinished uploads, so finished ones would stay for ever.
      const onDisk = [...new Set((await readdir(deps.dir).catch(() => [] as string[])).map((n) => n.replace(/\.json$/, '')).filter((n) => ID.test(n)))];
      const named = new Set((await deps.db.query<{ id: string }>('SELECT id FROM console_uploads WHERE id = ANY($1)', [onDisk])).rows.map((r) => r.id));
      let orphans = 0;
      for (const id of onDisk.filter((i) => !named.has(i))) {
        const files = [path.join(deps.dir, id), path.join(deps.dir, `${id}.json`)];
        const times = await Promise.all(files.map((f) => stat(f).then((st) => st.mtimeMs, () => 0)));
        if (Date.now() - Math.max(...times) < ORPHAN_GRACE_MS) continue;
        await Promise.all(files.map((f) => rm(f, { force: true })));
        orphans++;
      }
      await store.deleteExpired().catch(() => 0);
      return old.rows.length + orphans;
    },
  };
}
