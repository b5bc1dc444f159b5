import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { AppError } from '../../core/errors.ts';
import { mapBounded } from '../../core/map-bounded.ts';
import { fingerprintInput } from '../../images/fingerprint-input.ts';
import { parseImageUrl } from '../../images/ssrf.ts';
import { lookupFingerprints, type LookupMatch, type LookupQuery } from '../../registry/lookup.ts';
import type { AppDeps } from '../deps.ts';
import type { ImageInput } from '../../analysis/request.ts';
import { resolveUploadInputs } from '../../analysis/service.ts';
import { connectionSignal } from '../connection.ts';
import { principalOf } from '../plugins/auth.ts';
import { errorResponses } from '../schemas/common.ts';
import { lookupBodySchema, lookupQuerySchema, lookupResponseSchema, type LookupResponse } from '../schemas/lookup.ts';

const IMAGE_CONCURRENCY = 4;

const MATCH_TIERS =
  'Match tiers: `exact` = same SHA-256 (reported with `hammingDistance` 0); `fuzzy` = the photo with the smallest pHash Hamming distance within `threshold` (ties: most recently analyzed); `none` = no match. Only the caller\'s own photos are searched (the anonymous sandbox key has none). Free: no credits move and nothing is stored.';

function response(keys: string[], results: Map<string, LookupMatch>, requestId: string, startedAt: number): LookupResponse {
  return {
    object: 'lookup',
    results: Object.fromEntries(results),
    meta: {
      imagesSubmitted: keys.length,
      imagesMatched: keys.filter((k) => results.get(k)?.matchType !== 'none').length,
      processingTimeMs: Math.round(performance.now() - startedAt),
      requestId,
    },
  };
}

/**
 * A refusal of one image, naming the item: the shared image readers speak of "imageBase64" or
 * "Image URL", which is not what this route's body calls them.
 */
function namedItem(err: unknown, field: string, i: number): unknown {
  if (!(err instanceof AppError)) return err;
  return new AppError(err.code, `body.${field}.${i}: ${err.message}`, { cause: err, ...(err.details ? { details: err.details } : {}), ...(err.headers ? { headers: err.headers } : {}) });
}

export function lookupRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const route = app.withTypeProvider<ZodTypeProvider>();

    route.post(
      '/v2/lookup',
      {
        config: { auth: 'key' },
        bodyLimit: deps.config.MAX_BODY_BYTES,
        schema: {
          operationId: 'lookupByImage',
          summary: 'Look photos up in the registry by image',
          description: `Provide exactly one of \`images\` (URLs), \`images_base64\` or \`uploadIds\` (finished uploads, POST /v1/uploads), 1 to 50 items. \`results\` is keyed by the SHA-256 of each image (duplicates share one key). ${MATCH_TIERS} An image that cannot be fetched or decoded fails the request with 422, as on analyze.`,
          tags: ['lookup'],
          security: [{ bearer: [] }],
          body: lookupBodySchema,
          response: { 200: lookupResponseSchema, ...errorResponses(400, 401, 404, 413, 415, 422, 429) },
        },
      },
      async (request, reply) => {
        const startedAt = performance.now();
        const principal = principalOf(request);
        const { images, images_base64: base64s, uploadIds, threshold } = request.body;
        const field = images ? 'images' : uploadIds ? 'uploadIds' : 'images_base64';
        // The anonymous key owns no photos and makes no server-side fetch: its URLs are all `none`.
        if (images && principal.anonymous) {
          // Vetted like any image URL (no network involved); only the fetch is skipped.
          images.forEach((url, i) => {
            try {
              parseImageUrl(url);
            } catch (err) {
              throw namedItem(err, field, i);
            }
          });
          const keys = [...new Set(images)];
          return response(keys, new Map(keys.map((k) => [k, { matchType: 'none' as const }])), request.id, startedAt);
        }
        const inputs: ImageInput[] = images ? images.map((url) => ({ url })) : uploadIds ? uploadIds.map((uploadId) => ({ uploadId })) : base64s!.map((base64) => ({ base64 }));
        // An upload id names the account's own upload (404 otherwise) before any image is read.
        // Lookup is free: it does not restart the uploads' expiry (docs/decisions.md, "No storage without payment").
        await resolveUploadInputs(deps, principal.accountId, inputs, 'body.uploadIds');
        // A client that disconnects takes its queued HEIC/BMP decodes with it.
        const signal = connectionSignal(reply);
        const fingerprints = await mapBounded(inputs, IMAGE_CONCURRENCY, async (input, i) => {
          try {
            const source = input.upload ? { bytes: await deps.uploads!.bytes(input.upload) } : { url: input.url, base64: input.base64 };
            return await fingerprintInput(source, {
              maxBytes: deps.config.IMAGE_MAX_BYTES,
              maxPixels: deps.config.IMAGE_MAX_PIXELS,
              fetchPolicy: deps.fetchPolicy,
              signal,
            });
          } catch (err) {
            throw namedItem(err, field, i);
          }
        });
        const queries: LookupQuery[] = fingerprints.map((f) => ({ key: f.sha256, sha256: f.sha256, pHash: f.pHash }));
        const results = await lookupFingerprints(deps.db, { accountId: principal.accountId, queries, threshold });
        return response(queries.map((q) => q.key), results, request.id, startedAt);
      },
    );

    route.get(
      '/v2/lookup',
      {
        config: { auth: 'key' },
        schema: {
          operationId: 'lookupByFingerprint',
          summary: 'Look a photo up in the registry by fingerprint',
          description: `Provide exactly one of \`sha256\` (exact match only) or \`pHash\` (fuzzy: a stored photo with the very same pHash is \`fuzzy\` at distance 0, since \`exact\` means the same bytes). \`results\` is keyed by the submitted fingerprint. ${MATCH_TIERS}`,
          tags: ['lookup'],
          security: [{ bearer: [] }],
          querystring: lookupQuerySchema,
          response: { 200: lookupResponseSchema, ...errorResponses(400, 401, 429) },
        },
      },
      async (request) => {
        const startedAt = performance.now();
        const { sha256, pHash, threshold } = request.query;
        const query: LookupQuery = sha256 !== undefined ? { key: sha256, sha256 } : { key: pHash!, pHash: pHash! };
        const results = await lookupFingerprints(deps.db, { accountId: principalOf(request).accountId, queries: [query], threshold });
        return response([query.key], results, request.id, startedAt);
      },
    );
  };
}
