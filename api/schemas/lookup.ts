import { z } from 'zod';
import { THRESHOLD } from '../../registry/lookup.ts';
import { MAX_BASE64_CHARS, MAX_URL_CHARS, lensOutputRef, timestampSchema, uploadIdSchema } from '../../analysis/contract.ts';
import { LENS_NAMES } from '../../lenses/index.ts';

/** Request and response of POST and GET /v2/lookup (docs/contract.md "POST /v2/lookup and GET /v2/lookup"). */

export const MAX_LOOKUP_IMAGES = 50;
const SHA256 = /^[0-9a-f]{64}$/;
const PHASH = /^[0-9a-f]{16}$/;

export const lensRecordSchema = z
  .object({
    eventId: z.string(),
    output: z.record(z.string(), z.unknown()),
    version: z.string(),
    producedAt: timestampSchema,
    coRunHash: z.string(),
    provider: z.string(),
  })
  .meta({ id: 'LensRecord' });

export const photoRecordSchema = z
  .object({
    sha256: z.string(),
    pHash: z.string(),
    dHash: z.string(),
    firstAnalyzedAt: timestampSchema,
    lastAnalyzedAt: timestampSchema,
    totalCreditsSpent: z.number().int(),
    analyzeCallCount: z.number().int(),
    lenses: z.record(z.string(), lensRecordSchema).meta({
      // In the document each known lens's record carries its own output type. Not checked at
      // runtime: records made by an older lens version are served as they were stored.
      properties: Object.fromEntries(
        LENS_NAMES.map((name) => [name, { allOf: [{ $ref: '#/components/schemas/LensRecord' }, { type: 'object', properties: { output: lensOutputRef(name) } }] }]),
      ),
    }),
  })
  .meta({ id: 'PhotoRecord', description: 'Registry projection of one photo of the caller, keyed by lens.' });

export const lookupResultSchema = z
  .object({
    matchType: z.enum(['exact', 'fuzzy', 'none']),
    hammingDistance: z
      .number()
      .int()
      .optional()
      .describe('pHash Hamming distance to the matched photo; 0 on an exact match; absent when `none`.'),
    photo: photoRecordSchema.optional().describe('Absent when `matchType` is `none`.'),
  })
  .meta({ id: 'LookupResult' });

export const lookupResponseSchema = z
  .object({
    object: z.literal('lookup'),
    results: z.record(z.string(), lookupResultSchema),
    meta: z.object({
      imagesSubmitted: z.number().int().describe('Images (or fingerprints) in the request, duplicates included.'),
      imagesMatched: z.number().int().describe('Of those, how many matched `exact` or `fuzzy`.'),
      processingTimeMs: z.number().int(),
      requestId: z.string(),
    }),
  })
  .meta({ id: 'Lookup' });

export type LookupResponse = z.infer<typeof lookupResponseSchema>;

const threshold = z
  .number({ error: `must be an integer from ${THRESHOLD.min} to ${THRESHOLD.max}` })
  .int({ error: `must be an integer from ${THRESHOLD.min} to ${THRESHOLD.max}` })
  .min(THRESHOLD.min)
  .max(THRESHOLD.max)
  .default(THRESHOLD.default)
  .describe('Largest pHash Hamming distance that counts as a fuzzy match.');

export const lookupBodySchema = z
  .strictObject({
    images: z
      .array(z.url({ message: 'must be an absolute URL' }).max(MAX_URL_CHARS))
      .min(1)
      .max(MAX_LOOKUP_IMAGES)
      .optional()
      .describe('Image URLs (http or https).'),
    images_base64: z
      .array(z.string().min(1).max(MAX_BASE64_CHARS, `must be at most ${MAX_BASE64_CHARS} characters`))
      .min(1)
      .max(MAX_LOOKUP_IMAGES)
      .optional()
      .describe('Base64 images (plain or data URI).'),
    uploadIds: z
      .array(uploadIdSchema)
      .min(1)
      .max(MAX_LOOKUP_IMAGES)
      .optional()
      .describe('Ids of finished uploads of this account (POST /v1/uploads).'),
    threshold,
  })
  .superRefine((body, ctx) => {
    if (body.uploadIds !== undefined) {
      if (body.images !== undefined || body.images_base64 !== undefined) ctx.addIssue({ code: 'custom', path: ['uploadIds'], message: 'provide exactly one of images, images_base64 or uploadIds' });
    } else if ((body.images === undefined) === (body.images_base64 === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['images'], message: 'provide exactly one of images or images_base64' });
    }
  })
  .meta({ id: 'LookupRequest', examples: [{ images: ['https://example.com/photo.jpg'], threshold: 5 }, { uploadIds: ['upl_4f1c9a0be27d4c55a1f0e3b8d6c2a917'] }] });

export type LookupBody = z.infer<typeof lookupBodySchema>;

// Query strings carry text: only plain decimal digits are a threshold ("1e1", " 5", "0x10" are not);
// an empty value or `null` means the default.
const thresholdParam = z
  .preprocess(
    (v) => (v === '' || v === 'null' ? undefined : typeof v === 'string' && /^[0-9]{1,3}$/.test(v) ? Number(v) : v),
    threshold,
  )
  .describe(`Integer ${THRESHOLD.min}–${THRESHOLD.max}, default ${THRESHOLD.default}; an empty value or \`null\` means the default. Applies to pHash matching.`);

export const lookupQuerySchema = z
  .object({
    sha256: z.string().regex(SHA256, 'must be 64 lowercase hex characters').optional().describe('SHA-256 of the image bytes: exact match only.'),
    pHash: z.string().regex(PHASH, 'must be 16 lowercase hex characters').optional().describe('64-bit DCT perceptual hash: fuzzy match within `threshold`.'),
    threshold: thresholdParam,
  })
  .superRefine((q, ctx) => {
    if ((q.sha256 === undefined) === (q.pHash === undefined)) {
      ctx.addIssue({ code: 'custom', path: [q.sha256 === undefined ? 'sha256' : 'pHash'], message: 'provide exactly one of sha256 or pHash (names are case-sensitive)' });
    }
  });

export type LookupQueryString = z.infer<typeof lookupQuerySchema>;
