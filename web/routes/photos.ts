import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AnalyzeDeps } from '../analysis/deps.ts';
import { requireMember } from '../accounts/workspaces.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import { SHA256_HEX } from '../images/blobstore.ts';
import { fingerprintInput } from '../images/fingerprint-input.ts';
import { erasePhoto } from '../registry/erase.ts';
import { galleryPage, galleryPhoto } from '../registry/gallery.ts';
import { lookupFingerprints, THRESHOLD } from '../registry/lookup.ts';

const workspace = z.object({ workspaceId: z.string().min(1).max(100) });
const photoParams = workspace.extend({ sha256: z.string().max(64) });
const listQuery = z.strictObject({ cursor: z.string().min(1).max(100).optional(), limit: z.coerce.number().int().min(1).max(100).default(40) });
const lookupBody = z.strictObject({ imageBase64: z.string().min(1) });

function parse<T extends z.ZodType>(what: string, schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) throw validationFailed(`${what}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

const noSuchPhoto = () => new AppError('NOT_FOUND', 'No such photo in this workspace');

/**
 * The console's Photos section (docs/decisions.md "The console's Photos"): the workspace's
 * registry. Every member reads it; another workspace's person gets 404 whatever exists.
 * - `GET …/photos?cursor=&limit=`: newest analyzed first, keyset pages, each photo with its lens
 *   records and when each was billed and for how much; thumbnails come from `…/thumbnails/{sha256}`
 *   (web/batch-routes.ts: made once, private);
 * - `GET …/photos/{sha256}`: one photo's lens records as the API's lookup gives them, with their billing;
 * - `POST …/photos/lookup` `{"imageBase64": …}`: the registry's lookup by image, as POST /v2/lookup
 *   (exact, then fuzzy at the default threshold); nothing is stored, nothing charged;
 * - `DELETE …/photos/{sha256}`: the API's erasure (DELETE /v1/photos/{sha256}, registry/erase.ts),
 *   by owners and admins, as the other actions that change the workspace's data.
 */
export function registerPhotoRoutes(app: FastifyInstance, pipeline: AnalyzeDeps, signedIn: (request: FastifyRequest) => Promise<{ id: string }>): void {
  const { db } = pipeline;
  const base = '/api/v1/workspaces/:workspaceId/photos';
  const member = async (request: FastifyRequest, roles?: Array<'owner' | 'admin' | 'member'>) => {
    const person = await signedIn(request);
    const { workspaceId } = parse('path', workspace, request.params);
    await requireMember(db, person.id, workspaceId, roles);
    return workspaceId;
  };
  const sha256Of = (request: FastifyRequest) => {
    const { sha256 } = parse('path', photoParams, request.params);
    if (!SHA256_HEX.test(sha256)) throw noSuchPhoto();
    return sha256;
  };

  app.get(base, async (request, reply) => {
    const workspaceId = await member(request);
    const q = parse('query', listQuery, request.query);
    return reply.header('cache-control', 'no-store').send(await galleryPage(db, workspaceId, { limit: q.limit, ...(q.cursor ? { cursor: q.cursor } : {}) }));
  });

  // A photo's bytes as base64 JSON, up to the API's own image cap (and its base64 growth).
  app.post(`${base}/lookup`, { bodyLimit: Math.ceil((pipeline.config.IMAGE_MAX_BYTES * 4) / 3) + 1024 }, async (request, reply) => {
    const workspaceId = await member(request);
    const { imageBase64 } = parse('body', lookupBody, request.body);
    const f = await fingerprintInput({ base64: imageBase64 }, { maxBytes: pipeline.config.IMAGE_MAX_BYTES, maxPixels: pipeline.config.IMAGE_MAX_PIXELS, fetchPolicy: pipeline.fetchPolicy });
    const results = await lookupFingerprints(db, { userId: workspaceId, queries: [{ key: f.sha256, sha256: f.sha256, pHash: f.pHash }], threshold: THRESHOLD.default });
    const match = results.get(f.sha256)!;
    return reply.header('cache-control', 'no-store').send({
      sha256: f.sha256,
      matchType: match.matchType,
      ...(match.matchType === 'none' ? {} : { hammingDistance: match.hammingDistance, photo: { sha256: match.photo.sha256, lastAnalyzedAt: match.photo.lastAnalyzedAt, lenses: Object.keys(match.photo.lenses) } }),
    });
  });

  app.get(`${base}/:sha256`, async (request, reply) => {
    const workspaceId = await member(request).catch(() => {
      throw noSuchPhoto();
    });
    const photo = await galleryPhoto(db, workspaceId, sha256Of(request));
    if (!photo) throw noSuchPhoto();
    return reply.header('cache-control', 'no-store').send(photo);
  });

  app.delete(`${base}/:sha256`, async (request) => {
    const workspaceId = await member(request, ['owner', 'admin']);
    const erased = await erasePhoto(db, pipeline.blobs, { userId: workspaceId, sha256: sha256Of(request) });
    if (!erased) throw noSuchPhoto();
    return { sha256: erased.sha256, lensRecordsDeleted: erased.lensRecords, vehicleReportsDeleted: erased.vehicleReports, batchItemsErased: erased.batchItems };
  });
}
