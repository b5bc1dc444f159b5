import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError } from '../../core/errors.ts';
import { erasePhoto } from '../../registry/erase.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../plugins/auth.ts';
import { errorResponses } from '../schemas/common.ts';

const params = z.object({
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex characters (the SHA-256 of the photo’s bytes, as lookup and analyze report it)'),
});

const erasedSchema = z
  .object({
    object: z.literal('photo.erased'),
    sha256: z.string(),
    lensRecordsDeleted: z.int().describe('Lens records erased with the photo (one per lens ever run on it)'),
    vehicleReportsDeleted: z.int().describe('Vehicle-condition reports that included the photo, erased with it'),
    batchItemsErased: z.int().describe('Finished batch items that named the photo: their results, name and URL are erased; they now say `PHOTO_NOT_IN_REGISTRY` with the date of the erasure'),
    requestId: z.string(),
  })
  .meta({ id: 'ErasedPhoto' });

export const notInRegistry = () => new AppError('PHOTO_NOT_IN_REGISTRY', 'Your registry holds no photo with this SHA-256 (never analyzed by this account, or already erased)');

/** The caller's photo registry: erasure (docs/privacy.md). */
export function photoRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const route = app.withTypeProvider<ZodTypeProvider>();
    route.delete(
      '/v1/photos/:sha256',
      {
        config: { auth: 'key' },
        schema: {
          operationId: 'deletePhoto',
          summary: 'Erase a photo from your registry',
          description:
            'Erases the photo from your account’s registry: its lens records (lookup finds nothing, a new analysis bills every lens again), the vehicle reports that included it, the stored answers of earlier requests that carried its results, your uploads of the same bytes, and the name, URL and results of finished batch items that named it (their items and exports then say `PHOTO_NOT_IN_REGISTRY: The photo was erased …`). Its bytes leave the blob store at once unless something else keeps them: another account that sent the same bytes, a batch that has yet to run the photo, or an analysis of it already under way (then the worker’s collector deletes them within `BLOB_GC_GRACE_MS` after that run, when nothing keeps them). An analysis or batch photo of the same bytes running while you erase completes and records its own result: erase again after it answered. Erasing again answers 404 `PHOTO_NOT_IN_REGISTRY`, as does a photo your account never analyzed, or another account’s. Free. Needs a live key (a `svc_test_` sandbox key is refused with 403: it never changes real data).',
          tags: ['photos'],
          security: [{ bearer: [] }],
          params,
          response: { 200: erasedSchema, ...errorResponses(400, 401, 403, 404, 429) },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        if (!principal.accountId) throw notInRegistry(); // the anonymous sandbox key holds no photos
        if (principal.sandbox) throw new AppError('FORBIDDEN', 'A svc_test_ sandbox key never changes real data; erase photos with a live key');
        const erased = await erasePhoto(deps.db, deps.blobs, { accountId: principal.accountId, sha256: request.params.sha256 });
        if (!erased) throw notInRegistry();
        request.log.info({ lensRecords: erased.lensRecords }, 'photo erased');
        return {
          object: 'photo.erased' as const,
          sha256: erased.sha256,
          lensRecordsDeleted: erased.lensRecords,
          vehicleReportsDeleted: erased.vehicleReports,
          batchItemsErased: erased.batchItems,
          requestId: request.id,
        };
      },
    );
  };
}
