import { z } from 'zod';
import { ERROR_STATUS, type ErrorCode } from '../../core/errors.ts';

/** Every error code the API answers with: one vocabulary from core/errors.ts to the OpenAPI document. */
const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

/** An error code, named once in the document: the envelope's and a failed batch item's. */
export const errorCodeSchema = z.enum(ERROR_CODES).meta({ id: 'ErrorCode' });

/** The error envelope (docs/contract.md "Errors"), used in every route's documented responses. */
export const errorEnvelopeSchema = z
  .object({
    error: z
      .object({
        code: errorCodeSchema,
        message: z.string(),
        retryable: z.boolean(),
        requestId: z.string(),
        credits: z
          .object({
            needed: z.number().int(),
            community: z.number().int(),
            purchased: z.number().int(),
            total: z.number().int(),
            resetsInDays: z.number().int().describe('Relative, never a timestamp; 0 since the monthly refill was retired'),
          })
          .meta({ id: 'CreditShortfall', description: 'What the call needs and what is available, in credits' })
          .optional()
          .describe('402 `PLAN_LIMIT_EXCEEDED` only'),
      })
      .loose(),
  })
  .meta({ id: 'ErrorEnvelope' });

/** Documented error responses for a route, by status. */
export function errorResponses(...statuses: number[]): Record<number, typeof errorEnvelopeSchema> {
  return Object.fromEntries(statuses.map((s) => [s, errorEnvelopeSchema]));
}
