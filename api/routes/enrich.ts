import type { FastifyPluginAsync } from 'fastify';
import { noteRequestOutcome } from '../plugins/request-log.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { validationFailed } from '../../core/errors.ts';
import { ENRICH_FORMATS } from '../../enrich/mapping.ts';
import { ENRICH_CREDITS } from '../../credits/price-book.ts';
import { enrichPhoto } from '../../enrich/service.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../plugins/auth.ts';
import { MAX_BASE64_CHARS, MAX_URL_CHARS, uploadIdSchema } from '../../analysis/contract.ts';
import { resolveUploadInputs } from '../../analysis/service.ts';
import type { ImageInput } from '../../analysis/request.ts';
import { errorResponses } from '../schemas/common.ts';

const formatSchema = z.enum(ENRICH_FORMATS, {
  error: (issue) =>
    issue.input === 'c2pa'
      ? 'c2pa is deferred: C2PA manifests are not written yet; use exif, iptc or xmp'
      : `must be one of ${ENRICH_FORMATS.join(', ')}`,
});

export const enrichBodySchema = z
  .strictObject({
    imageUrl: z.url({ message: 'must be an absolute URL' }).max(MAX_URL_CHARS).optional(),
    imageBase64: z.string().min(1).max(MAX_BASE64_CHARS, `must be at most ${MAX_BASE64_CHARS} characters`).optional(),
    uploadId: uploadIdSchema.optional(),
    formats: z.array(formatSchema).min(1).max(4).describe('Metadata blocks to write: exif, iptc, xmp (c2pa is deferred)'),
  })
  .meta({ id: 'EnrichRequest', examples: [{ imageUrl: 'https://example.com/photo.jpg', formats: ['exif', 'xmp'] }, { uploadId: 'upl_4f1c9a0be27d4c55a1f0e3b8d6c2a917', formats: ['xmp'] }] });

export const enrichmentSchema = z
  .object({
    object: z.literal('enrichment'),
    imageBase64: z.string().describe('The enriched image: same pixels, same container, new metadata'),
    formatsWritten: z.array(z.enum(ENRICH_FORMATS)).describe('Blocks actually written (a container may not hold every block)'),
    lensVersions: z.record(z.string(), z.string()).describe('Lens → version of the record written'),
    sha256: z.string().describe('SHA-256 of the original image (the registry key)'),
    meta: z.object({
      requestId: z.string(),
      processingTimeMs: z.number().int(),
      creditsCharged: z.number().int(),
      ai_generated: z.literal(true),
    }),
  })
  .meta({ id: 'Enrichment' });

export function enrichRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    app.withTypeProvider<ZodTypeProvider>().post(
      '/v2/enrich',
      {
        config: { auth: 'key' },
        bodyLimit: deps.config.MAX_BODY_BYTES,
        schema: {
          operationId: 'enrichPhoto',
          summary: 'Write cached lens output into the photo’s metadata',
          description: `Writes the caller’s registry lens records of this photo (same SHA-256) into its EXIF, IPTC and/or XMP blocks and returns the enriched image; the pixels are not re-encoded. Never runs an analysis: a photo without lens records is 404 PHOTO_NOT_IN_REGISTRY. ${ENRICH_CREDITS} credits per call; sandbox keys write the lens fixtures and bill nothing.`,
          tags: ['enrich'],
          security: [{ bearer: [] }],
          body: enrichBodySchema,
          response: { 200: enrichmentSchema, ...errorResponses(400, 401, 402, 404, 413, 415, 422, 429) },
        },
      },
      async (request) => {
        const startedAt = performance.now();
        const principal = principalOf(request);
        const { uploadId, ...body } = request.body;
        // An upload id names the account's own upload (404 otherwise) before anything is read or billed.
        const named: ImageInput[] = uploadId !== undefined ? [{ uploadId }] : [];
        const used = await resolveUploadInputs(deps, principal.accountId, named, () => 'body');
        if (named[0]?.upload && (body.imageUrl !== undefined || body.imageBase64 !== undefined)) throw validationFailed('body: provide exactly one of imageUrl, imageBase64 or uploadId');
        const result = await enrichPhoto(
          {
            config: deps.config,
            db: deps.db,
            metadata: deps.metadata!,
            limiter: deps.enrichLimiter!,
            fetchPolicy: deps.fetchPolicy,
          },
          principal,
          { ...body, ...(named[0]?.upload ? { imageBytes: await deps.uploads!.bytes(named[0].upload) } : {}) },
          request.id,
        );
        await deps.uploads?.touch(principal.accountId!, used);
        noteRequestOutcome(request, { credits: result.creditsCharged, analysisId: null });
        return {
          object: 'enrichment' as const,
          imageBase64: result.image.toString('base64'),
          formatsWritten: result.formatsWritten,
          lensVersions: result.lensVersions,
          sha256: result.sha256,
          meta: {
            requestId: request.id,
            processingTimeMs: Math.round(performance.now() - startedAt),
            creditsCharged: result.creditsCharged,
            ai_generated: true as const,
          },
        };
      },
    );
  };
}
