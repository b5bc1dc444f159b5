import { z } from 'zod';
import { VENDOR_NAMES } from '../core/vendor-names.ts';
import { LENS_NAMES, LENSES, SELECTABLE_LENSES, getLens, outputFields, type Lens } from '../lenses/index.ts';
import { sandboxOutput } from '../lenses/fixtures.ts';
import { STACKS } from '../lenses/stacks.ts';
import { ACCEPTED_FORMATS } from '../images/probe.ts';
import { BESPOKE_CREDITS } from '../credits/price-book.ts';

/** Request and response of POST /v1/analyze and /v2/analyze (docs/contract.md "POST /v1/analyze and /v2/analyze"). */
export const MAX_BASE64_CHARS = 67_000_000;
export const MAX_URL_CHARS = 2048;

const url = z.url({ message: 'must be an absolute URL' }).max(MAX_URL_CHARS).describe(`URL of an image: ${ACCEPTED_FORMATS}`);
const base64 = z
  .string()
  .min(1)
  .max(MAX_BASE64_CHARS, `must be at most ${MAX_BASE64_CHARS} characters`)
  .describe(`An image as base64 (plain or data URI): ${ACCEPTED_FORMATS}`);

/**
 * A name from a list: an enum in the OpenAPI document, a string at runtime, so an unknown name
 * gets the service's own 400 that names it and lists the known ones (lenses/resolve.ts).
 */
function documentedEnum(names: readonly string[]) {
  return z.string().min(1).max(100).meta({ enum: [...names] });
}

/** A lens a caller may pick (GET /v1/modules), named once in the document for every list of lenses. */
export const lensNameSchema = documentedEnum(SELECTABLE_LENSES).meta({ id: 'LensName', description: 'A lens a request may name (GET /v1/modules)' });
/** Any lens, internal ones too: what a stack may hold, so what `modulesRemove` may take out. */
export const anyLensNameSchema = documentedEnum(LENS_NAMES).meta({ id: 'AnyLensName', description: 'Any lens, including those only a stack runs (`modulesRemove`)' });
/** A stack (curated lens set) by name. */
export const stackNameSchema = documentedEnum(STACKS.map((st) => st.name)).meta({ id: 'StackName', description: 'A stack (curated lens set) from GET /v1/modules' });

/** A moment, as the API writes every one: RFC 3339 in UTC (`2026-11-26T17:40:00.000Z`). */
export const timestampSchema = z.string().meta({ format: 'date-time' });

/** An upload (POST /v1/uploads, tus) by its id: the account's own, finished, not expired. */
export const uploadIdSchema = z.string().min(1).max(100).describe('The id of a finished upload of this account (`upl_…`, POST /v1/uploads)');

export const imageItemSchema = z
  .strictObject({ url: url.optional(), base64: base64.optional(), uploadId: uploadIdSchema.optional() })
  .meta({ id: 'ImageItem', description: 'One photo: `url`, `base64`, or `uploadId` (a finished resumable upload)', examples: [{ uploadId: 'upl_4f1c9a0be27d4c55a1f0e3b8d6c2a917' }] });

export const contextSchema = z.strictObject({
  knownPeople: z
    .array(
      z.strictObject({
        name: z.string().min(1).max(200),
        birthYear: z.number().int().min(1000).max(3000).optional(),
        deathYear: z.number().int().min(1000).max(3000).optional(),
        role: z.string().max(100).optional(),
      }),
    )
    .max(50)
    .optional(),
  vehicle: z
    .strictObject({
      vin: z.string().max(20).optional(),
      mileage: z.number().int().min(0).max(10_000_000).optional(),
      year: z.number().int().min(1885).max(2100).optional(),
      make: z.string().max(100).optional(),
      model: z.string().max(100).optional(),
    })
    .optional(),
  customInstructions: z.string().max(2000).optional(),
});

export const analyzeBodyV1 = z
  .strictObject({
    imageUrl: url.optional(),
    imageBase64: base64.optional(),
    images: z.array(imageItemSchema).min(1).max(50).optional(),
    preset: stackNameSchema.optional(),
    modules: z.array(lensNameSchema).max(50).optional().describe('Lenses to run (instead of a stack)'),
    modulesAdd: z.array(lensNameSchema).max(50).optional().describe('Lenses added to the stack'),
    modulesRemove: z.array(anyLensNameSchema).max(50).optional().describe('Lenses taken out of the stack (moderation always runs)'),
    moduleOptions: z.record(z.string().max(100), z.record(z.string().max(100), z.unknown())).optional(),
    context: contextSchema.optional(),
    options: z.strictObject({ includeEmbedding: z.boolean().optional(), includeFingerprint: z.boolean().optional() }).optional(),
    refresh: z.boolean().default(false),
  })
  .meta({ id: 'AnalyzeRequest', examples: [{ imageUrl: 'https://example.com/photo.jpg', modules: ['dating', 'location'] }, { images: [{ uploadId: 'upl_4f1c9a0be27d4c55a1f0e3b8d6c2a917' }], preset: 'quick-scan' }] });

export const extractSchema = z
  .strictObject({
    prompt: z.string().min(1).max(500).optional().describe('Natural-language request; the AI drafts the schema.'),
    // Recursive node shapes do not survive OpenAPI generation; the full recursive check
    // (bespoke/schema.ts) runs in the service and names the failing path.
    schema: z
      .looseObject({ type: z.literal('object'), properties: z.record(z.string(), z.unknown()), required: z.array(z.string()).optional() })
      .optional()
      .describe(
        'Inline JSON Schema, object root. Nodes: type (string, number, integer, boolean, object, array), description, enum, items, properties, required. At most 5 levels, 100 properties, 16,000 characters.',
      ),
    schemaId: z
      .string()
      .regex(/^bsk_[0-9a-f]{32}$/, 'must be bsk_ followed by 32 lowercase hex characters')
      .optional()
      .describe('A schema saved earlier by this account (every schema used is saved).'),
  })
  .describe(`Bespoke extraction: exactly one of prompt, schema, schemaId. Always ${BESPOKE_CREDITS} credits per call.`);

/** /v2/analyze: the v1 body plus `extract`. */
export const analyzeBodyV2 = analyzeBodyV1.extend({ extract: extractSchema.optional() }).meta({
  id: 'AnalyzeRequestV2',
  examples: [{ imageUrl: 'https://example.com/photo.jpg', preset: 'quick-scan', extract: { prompt: 'The make, model and colour of every car' } }],
});

export type AnalyzeBody = z.infer<typeof analyzeBodyV2>;

const fingerprintSchema = z.object({ pHash: z.string(), dHash: z.string(), sha256: z.string() });

const pascal = (name: string) => name.split('-').map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('');

/** Each lens's output as an OpenAPI component (`DatingOutput`, …), straight from the lens module, its fixture as the example. */
export const LENS_OUTPUT_COMPONENTS: Readonly<Record<string, z.ZodType>> = Object.fromEntries(
  LENSES.map((lens) => [
    lens.name,
    lens.output.meta({ id: lensComponent(lens.name), description: `Fields the ${lens.name} lens adds to output`, examples: [lens.fixture] }),
  ]),
);

function lensComponent(name: string): string {
  return `${pascal(name)}Output`;
}

/** A reference to a lens's output component, for documents that type one lens's output. */
export const lensOutputRef = (name: string) => ({ $ref: `#/components/schemas/${lensComponent(name)}` });

/**
 * A lens's fields as document-only schemas that point at the lens's component
 * (`#/components/schemas/DatingOutput/properties/estimatedDate`): one definition per field, in
 * the lens module, however many outputs carry it.
 */
function lensFields(lens: Lens, opts: { optional: boolean }): Record<string, z.ZodType> {
  return Object.fromEntries(
    outputFields(lens).map((field) => {
      const ref = z.unknown().meta({ $ref: `#/components/schemas/${lensComponent(lens.name)}/properties/${field}` });
      return [field, opts.optional ? ref.optional() : ref];
    }),
  );
}

/** One photo's output: the fields of each lens it ran, flat (lens fields never share a name). */
function photoOutputShape(): z.ZodRawShape {
  const shape: Record<string, z.ZodType> = {};
  for (const lens of LENSES.filter((l) => l.name !== 'vehicle-condition')) {
    for (const [field, schema] of Object.entries(lensFields(lens, { optional: true }))) {
      if (shape[field]) throw new Error(`lens field ${field} of ${lens.name} is also another lens's field: outputs are merged flat`);
      shape[field] = schema;
    }
  }
  if (shape.bespoke) throw new Error('a lens field is named bespoke, which /v2/analyze extract output owns');
  shape.bespoke = z
    .object({
      schemaId: z.string().nullable().describe('The saved schema the extraction used (`bsk_…`); null in the sandbox'),
      data: z.record(z.string(), z.unknown()).nullable().describe('What was extracted, in the shape of that schema; null when the extraction produced nothing'),
    })
    .optional()
    .describe('/v2/analyze with `extract` only: the bespoke extraction');
  return shape;
}

const photoOutput = z.object(photoOutputShape()).meta({
  id: 'PhotoOutput',
  description: 'One photo (imageUrl or imageBase64): the fields of every lens that ran, flat. Each field is defined by its lens’s component (`DatingOutput`, …).',
  examples: [sandboxOutput(LENSES.filter((l) => l.name !== 'vehicle-condition').map((l) => l.name))],
});
const multiPhotoOutput = z
  .object({
    images: z.array(
      photoOutput.extend({
        index: z.int(),
        sha256: z.string().nullable(),
        cacheHit: z.boolean(),
        creditsCharged: z.int(),
        fingerprint: fingerprintSchema.optional(),
        embedding: z.array(z.number()).optional(),
      }),
    ),
  })
  .meta({ id: 'MultiPhotoOutput', description: 'Several photos (images): one entry per image, in request order' });
const vehicleReportOutput = z
  .object({ ...lensFields(getLens('vehicle-condition'), { optional: false }), reportId: z.string() })
  .meta({ id: 'VehicleReportOutput', description: 'The vehicle-condition stack (outputSchema "vehicle"): one report over all photos; each field is defined by `VehicleConditionOutput`' });

/**
 * `output` in the document: one of the three shapes, by components. At runtime the response is
 * not re-validated field by field (lens outputs were validated when the vendor answered, and
 * records of older lens versions must still be served), so the runtime schema stays an object.
 */
function objectOneOf(shapes: z.ZodType[]) {
  return (
    z
      // An object, checked; described by the anyOf (a free-keyed record beside it would widen every branch).
      .custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), 'must be an object')
      .meta({ type: 'object', anyOf: shapes.map((c) => ({ $ref: `#/components/schemas/${z.globalRegistry.get(c)!.id}` })) })
  );
}

const outputSchema = objectOneOf([photoOutput, multiPhotoOutput, vehicleReportOutput]);

/** A batch item's output: one photo's lens outputs, or a vehicle's report. */
export const batchItemOutputSchema = objectOneOf([photoOutput, vehicleReportOutput]);

export const analysisSchema = z
  .object({
    id: z.string(),
    object: z.literal('analysis'),
    schemaVersion: z.string(),
    createdAt: timestampSchema,
    output: outputSchema,
    outputSchema: z.enum(['photo', 'vehicle']),
    usage: z.object({
      inputTokens: z.number(),
      outputTokens: z.number(),
      totalTokens: z.number(),
      modulesUsed: z.array(z.string()),
      creditsCharged: z.number().int().optional(),
    }),
    warnings: z.array(z.string()),
    meta: z.object({
      processingTimeMs: z.number(),
      provider: z.string(),
      promptHash: z.string().nullable(),
      requestId: z.string(),
      ai_generated: z.literal(true),
      model: z.string(),
      vendor: z.enum(VENDOR_NAMES),
      cacheHit: z.boolean().optional(),
    }),
    embedding: z.array(z.number()).optional(),
    fingerprint: fingerprintSchema.optional(),
  })
  .meta({ id: 'Analysis' });

export type Analysis = z.infer<typeof analysisSchema>;
