import fastifyMultipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError, validationFailed } from '../../core/errors.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../plugins/auth.ts';

/** The one non-file part of a multipart analyze: the request's JSON fields. */
export const JSON_PART = 'request';
const MAX_PHOTO_PARTS = 50;

const ingested = new WeakMap<FastifyRequest, { accountId: string; ids: string[] }>();

/**
 * POST /v1/analyze (and /v2) as multipart/form-data, for the few-photo case: `curl -F
 * photo=@car.jpg`. Each file part streams into an upload (uploads/service.ts: the same datastore,
 * quota and finish as the tus route, never the whole photo in memory on the way), and the body the
 * route validates is the `request` part's JSON with those uploads appended to `images`. The
 * request's body still counts against the bytes-in-flight budget (its Content-Length) while it is
 * read; its uploads are deleted once it is answered (their blobs stay if the registry holds them).
 */
export async function registerMultipartAnalyze(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await app.register(fastifyMultipart, {
    limits: { fileSize: deps.config.IMAGE_MAX_BYTES, files: MAX_PHOTO_PARTS, fields: 1, fieldSize: 1024 * 1024, parts: MAX_PHOTO_PARTS + 1 },
    throwFileSizeLimit: true,
  });
  app.addHook('preValidation', async (request) => {
    if (!request.isMultipart()) return;
    const principal = principalOf(request);
    if (!principal.accountId) throw validationFailed('Authorization: multipart photos are kept as uploads of an account; the anonymous sandbox key has none (send JSON)');
    const held = { accountId: principal.accountId, ids: [] as string[] };
    ingested.set(request, held);
    let fields: Record<string, unknown> = {};
    const photos: string[] = [];
    try {
      for await (const part of request.parts()) {
        if (part.type === 'file') {
          const done = await deps.uploads!.ingest(principal.accountId, part.file, { maxBytes: deps.config.IMAGE_MAX_BYTES });
          held.ids.push(done.id);
          photos.push(done.id);
        } else {
          if (part.fieldname !== JSON_PART) throw validationFailed(`multipart: unknown field ${JSON.stringify(part.fieldname.slice(0, 100))}; send photos as file parts and the JSON fields as one part named "${JSON_PART}"`);
          // A part sent as application/json arrives parsed; a plain text part is parsed here.
          if (typeof part.value === 'string') {
            try {
              fields = JSON.parse(part.value) as Record<string, unknown>;
            } catch {
              throw validationFailed(`multipart: the "${JSON_PART}" part is not JSON`);
            }
          } else {
            fields = part.value as Record<string, unknown>;
          }
          if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) throw validationFailed(`multipart: the "${JSON_PART}" part must be a JSON object`);
        }
      }
    } catch (err) {
      if (err instanceof AppError) throw err;
      const code = (err as { code?: string }).code;
      if (code === 'FST_REQ_FILE_TOO_LARGE') throw new AppError('IMAGE_TOO_LARGE', `A photo part is over the ${deps.config.IMAGE_MAX_BYTES}-byte image limit`);
      if (code === 'FST_FILES_LIMIT' || code === 'FST_PARTS_LIMIT') throw validationFailed(`multipart: at most ${MAX_PHOTO_PARTS} photo parts; send more as a batch`);
      if (code === 'FST_FIELDS_LIMIT') throw validationFailed(`multipart: one non-file part only, named "${JSON_PART}"`);
      if (code === 'FST_INVALID_MULTIPART_CONTENT_TYPE' || code?.startsWith('FST_')) throw validationFailed(`multipart: ${(err as Error).message}`);
      throw err;
    }
    if (!photos.length) throw validationFailed('multipart: no photo part; attach at least one file (curl -F photo=@car.jpg)');
    if (fields.imageUrl !== undefined || fields.imageBase64 !== undefined) throw validationFailed(`multipart: photos come as file parts; leave imageUrl and imageBase64 out of "${JSON_PART}"`);
    const listed = Array.isArray(fields.images) ? (fields.images as unknown[]) : [];
    request.body = { ...fields, images: [...listed, ...photos.map((uploadId) => ({ uploadId }))] };
  });
  // Answered or abandoned by the caller: the request's own uploads go (their blobs to the collector).
  const forget = async (request: FastifyRequest) => {
    const held = ingested.get(request);
    ingested.delete(request);
    if (held?.ids.length) await deps.uploads!.remove(held.accountId, held.ids);
  };
  app.addHook('onResponse', forget);
  app.addHook('onRequestAbort', forget);
}
