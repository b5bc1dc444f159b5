import { z } from 'zod';

/** Request and response of POST /v1/analyze and /v2/analyze (SPEC "POST /v1/analyze"). */
export const MAX_BASE64_CHARS = 67_000_000;
export const MAX_URL_CHARS = 2048;

const url = z.url({ message: 'must be an absolute URL' }).max(MAX_URL_CHARS);
const base64 = z.string().min(1).max(MAX_BASE64_CHARS, `must be at most ${MAX_BASE64_CHARS} characters`);

export const imageItemSchema = z.strictObject({ url: url.optional(), base64: base64.optional() });

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
    preset: z.string().min(1).max(100).optional(),
    modules: z.array(z.string().min(1).max(100)).max(50).optional(),
    modulesAdd: z.array(z.string().min(1).max(100)).max(50).optional(),
    modulesRemove: z.array(z.string().min(1).max(100)).max(50).optional(),
    moduleOptions: z.record(z.string().max(100), z.record(z.string().max(100), z.unknown())).optional(),
    context: contextSchema.optional(),
    options: z.strictObject({ includeEmbedding: z.boolean().optional(), includeFingerprint: z.boolean().optional() }).optional(),
    refresh: z.boolean().default(false),
  })
  .meta({ id: 'AnalyzeRequest' });

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
  .describe('Bespoke extraction: exactly one of prompt, schema, schemaId. Always 5 credits per call.');

/** /v2/analyze: the v1 body plus `extract`. */
export const analyzeBodyV2 = analyzeBodyV1.extend({ extract: extractSchema.optional() }).meta({ id: 'AnalyzeRequestV2' });

export type AnalyzeBody = z.infer<typeof analyzeBodyV2>;

const fingerprintSchema = z.object({ pHash: z.string(), dHash: z.string(), sha256: z.string() });

export const analysisSchema = z
  .object({
    id: z.string(),
    object: z.literal('analysis'),
    schemaVersion: z.string(),
    createdAt: z.string(),
    output: z.record(z.string(), z.unknown()),
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
      vendor: z.enum(['openai', 'anthropic', 'google']),
      cacheHit: z.boolean().optional(),
    }),
    embedding: z.array(z.number()).optional(),
    fingerprint: fingerprintSchema.optional(),
  })
  .meta({ id: 'Analysis' });

export type Analysis = z.infer<typeof analysisSchema>;
