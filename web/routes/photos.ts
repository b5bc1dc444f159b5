import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { requireMember } from '../../accounts/workspaces.ts';
import { workspaceHoldsPhoto } from '../../batches/repository.ts';
import { AppError } from '../../core/errors.ts';
import { SHA256_HEX } from '../../images/blobstore.ts';
import { fingerprintInput } from '../../images/fingerprint-input.ts';
import { thumbnailOf } from '../../images/thumbnail.ts';
import { erasePhoto } from '../../registry/erase.ts';
import { galleryPage, galleryPhoto } from '../../registry/gallery.ts';
import { lookupFingerprints, THRESHOLD } from '../../registry/lookup.ts';
import type { WebContext } from '../deps.ts';
import { parse, workspaceParams } from '../plugins/validation.ts';

const photoParams = workspaceParams.extend({ sha256: z.string().max(64) });
const listQuery = z.strictObject({ cursor: z.string().min(1).max(100).optional(), limit: z.coerce.number().int().min(1).max(100).default(40) });
const lookupBody = z.strictObject({ imageBase64: z.string().min(1) });

const noSuchPhoto = () => new AppError('NOT_FOUND', 'No such photo in this workspace');

/**
 * The console's Photos section (docs/decisions.md "The console's Photos"): the workspace's
 * registry. Every member reads it; another workspace's person gets 404 whatever exists.
 * - `GET …/photos?cursor=&limit=`: newest analyzed first, keyset pages, each photo with its lens
 *   records and when each was billed and for how much; thumbnails come from `…/thumbnails/{sha256}`
 *   (below: made once, private);
 * - `GET …/photos/{sha256}`: one photo's lens records as the API's lookup gives them, with their billing;
 * - `POST …/photos/lookup` `{"imageBase64": …}`: the registry's lookup by image, as POST /v2/lookup
 *   (exact, then fuzzy at the default threshold); nothing is stored, nothing charged;
 * - `DELETE …/photos/{sha256}`: the API's erasure (DELETE /v1/photos/{sha256}, registry/erase.ts),
 *   by owners and admins, as the other actions that change the workspace's data;
 * - `GET …/thumbnails/{sha256}`: a photo's thumbnail (images/thumbnail.ts), for members of a
 *   workspace whose batches or registry hold it.
 * Served with the console's batch pipeline only (its blob store).
 */
export function photoRoutes(ctx: WebContext): FastifyPluginAsync {
  const { signedIn } = ctx;
  return async (app) => {
    const pipeline = ctx.deps.batches?.pipeline;
    if (!pipeline) return;
    const { db } = pipeline;
    const base = '/api/v1/workspaces/:workspaceId/photos';
    const member = async (request: FastifyRequest, roles?: Array<'owner' | 'admin' | 'member'>) => (await ctx.memberOf(request, roles)).workspaceId;
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
      const results = await lookupFingerprints(db, { accountId: workspaceId, queries: [{ key: f.sha256, sha256: f.sha256, pHash: f.pHash }], threshold: THRESHOLD.default });
      const match = results.get(f.sha256)!;
      return reply.header('cache-control', 'no-store').send({
        sha256: f.sha256,
        matchType: match.matchType,
        ...(match.matchType === 'none' ? {} : { hammingDistance: match.hammingDistance, photo: { sha256: match.photo.sha256, lastAnalyzedAt: match.photo.lastAnalyzedAt, lenses: Object.keys(match.photo.lenses) } }),
      });
    });

    app.get(`${base}/:sha256`, async (request, reply) => {
      // Signed out is 401 as on every route; another workspace's person gets 404 whatever exists.
      await signedIn(request);
      const workspaceId = await member(request).catch(() => {
        throw noSuchPhoto();
      });
      const photo = await galleryPhoto(db, workspaceId, sha256Of(request));
      if (!photo) throw noSuchPhoto();
      return reply.header('cache-control', 'no-store').send(photo);
    });

    app.delete(`${base}/:sha256`, async (request) => {
      const workspaceId = await member(request, ['owner', 'admin']);
      const erased = await erasePhoto(db, pipeline.blobs, { accountId: workspaceId, sha256: sha256Of(request) });
      if (!erased) throw noSuchPhoto();
      return { sha256: erased.sha256, lensRecordsDeleted: erased.lensRecords, vehicleReportsDeleted: erased.vehicleReports, batchItemsErased: erased.batchItems };
    });

    // A photo's thumbnail, for members of a workspace whose batches (not an item whose photo was erased)
    // or registry hold the photo;
    // anyone else gets 404 whether or not the photo exists. Cached by the browser only (private).
    app.get('/api/v1/workspaces/:workspaceId/thumbnails/:sha256', async (request, reply) => {
      const person = await signedIn(request);
      const { workspaceId, sha256 } = parse('path', photoParams, request.params);
      await requireMember(db, person.id, workspaceId).catch(() => {
        throw noSuchPhoto();
      });
      if (!SHA256_HEX.test(sha256)) throw noSuchPhoto();
      if (!(await workspaceHoldsPhoto(db, workspaceId, sha256))) throw noSuchPhoto();
      const thumb = await thumbnailOf(pipeline, sha256);
      if (!thumb) throw new AppError('NOT_FOUND', 'This photo’s bytes are no longer kept');
      // The same SHA-256 is always the same picture: cached for a day, never shared by proxies.
      return reply.header('cache-control', 'private, max-age=86400, immutable').type('image/webp').send(thumb.webp);
    });
  };
}
