import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { accountExists } from '../../auth/repository.ts';
import { getBalance, type Balance } from '../../credits/ledger.ts';
import { validationFailed } from '../../core/errors.ts';
import type { AppDeps } from '../deps.ts';
import { INTERNAL_ONLY_PARAMETER } from '../openapi.ts';
import { errorResponses } from '../schemas/common.ts';

export const usageSchema = z
  .object({
    tier: z.literal('starter'),
    community: z.object({
      balance: z.number().int(),
      monthlyAllowance: z.number().int(),
      referralBonus: z.number().int().optional(),
      resetsInDays: z.number().int(),
    }),
    purchased: z.object({ balance: z.number().int() }),
    reserved: z.number().int(),
  })
  .meta({ id: 'CreditBalance' });

export function usageResource(b: Balance): z.infer<typeof usageSchema> {
  return {
    tier: 'starter',
    // Legacy fields: every account here post-dates the 2026-05-18 refill cutover, so both are 0.
    community: { balance: b.community, monthlyAllowance: 0, ...(b.referralBonus > 0 ? { referralBonus: b.referralBonus } : {}), resetsInDays: 0 },
    purchased: { balance: b.purchased },
    reserved: b.reserved,
  };
}

const EMPTY: Balance = { community: 0, purchased: 0, reserved: 0, referralBonus: 0 };

export function usageRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    app.withTypeProvider<ZodTypeProvider>().get(
      '/v1/usage',
      {
        config: { auth: 'key-or-internal' },
        schema: {
          operationId: 'getUsage',
          summary: 'Credit balance',
          description: 'Bearer key, or `x-internal-secret` with `userId` (server-to-server).',
          tags: ['credits'],
          security: [{ bearer: [] }, { internalSecret: [] }],
          querystring: z.object({
            userId: z
              .string()
              .min(1)
              .max(128)
              .optional()
              .describe('The user whose balance to report; only with x-internal-secret')
              .meta({ [INTERNAL_ONLY_PARAMETER]: true }),
            tier: z.string().optional().describe('Accepted for backward compatibility; only `starter` is valid.'),
          }),
          response: { 200: usageSchema, ...errorResponses(400, 401, 429) },
        },
      },
      async (request) => {
        const { userId: accountId, tier } = request.query;
        if (tier !== undefined && tier !== 'starter') throw validationFailed(`query.tier: only "starter" is valid, got "${tier}"`);
        if (request.internal) {
          if (!accountId) throw validationFailed('query.userId: required with x-internal-secret');
          if (!(await accountExists(deps.db, accountId))) throw validationFailed(`query.userId: no user "${accountId}"`);
          return usageResource(await getBalance(deps.db, accountId));
        }
        const p = request.principal!;
        // The anonymous sandbox key has no account: it reports an empty balance.
        return usageResource(p.accountId ? await getBalance(deps.db, p.accountId) : EMPTY);
      },
    );
  };
}
