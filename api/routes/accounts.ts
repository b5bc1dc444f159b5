import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { setCardOnFile } from '../../accounts/card-on-file.ts';
import { createEmailVerification, verifyEmail } from '../../accounts/email-verification.ts';
import { createAccount, getAccount, type Account } from '../../accounts/users.ts';
import { getBalance } from '../../credits/ledger.ts';
import { firstPackBonusAvailable } from '../../credits/packs.ts';
import type { AppDeps } from '../deps.ts';
import {
  accountSchema,
  cardOnFileSchema,
  createAccountBody,
  emailVerificationSchema,
  emailVerifiedSchema,
  internalDoc,
  internalRoute,
  userIdParams,
  verifyEmailBody,
} from '../schemas/accounts.ts';
import { errorResponses } from '../schemas/common.ts';
import { accountKeyRoutes } from './account-keys.ts';
import { accountPurchaseRoutes } from './account-purchases.ts';
import { usageResource } from './usage.ts';

/**
 * Accounts for the web dashboard: billing accounts, e-mail verification, card on file, API keys and
 * credit packs, under /v1/internal/accounts.
 */
export function accountRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const view = async (a: Account) => ({
      ...a,
      firstPackBonusAvailable: await firstPackBonusAvailable(deps.db, a.userId),
      credits: usageResource(await getBalance(deps.db, a.userId)),
    });

    r.post(
      '/v1/internal/accounts',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'createAccount',
          summary: 'Create a user',
          description: 'A new user with no keys and no credits: verifying the e-mail grants 1,000 credits, a card on file 4,000.',
          body: createAccountBody,
          response: { 201: accountSchema, ...errorResponses(400, 401) },
        },
      },
      async (request, reply) => reply.code(201).send(await view(await createAccount(deps.db, request.body.email))),
    );

    r.get(
      '/v1/internal/accounts/:userId',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'getAccount',
          summary: 'A user with their credit balance',
          params: userIdParams,
          response: { 200: accountSchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => view(await getAccount(deps.db, request.params.userId)),
    );

    r.post(
      '/v1/internal/accounts/:userId/email-verifications',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'createEmailVerification',
          summary: 'Start e-mail verification',
          description: 'Mints a single-use token valid for 24 hours for the link the dashboard mails. No request body.',
          params: userIdParams,
          response: { 201: emailVerificationSchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request, reply) => reply.code(201).send(await createEmailVerification(deps.db, { accountId: request.params.userId })),
    );

    r.post(
      '/v1/internal/email-verifications/verify',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'verifyEmail',
          summary: 'Verify an e-mail address with its token',
          description: 'Uses the token (once, before it expires), marks the address verified and grants 1,000 community credits once ever.',
          body: verifyEmailBody,
          response: { 200: emailVerifiedSchema, ...errorResponses(400, 401) },
        },
      },
      async (request) => verifyEmail(deps.db, { token: request.body.token }),
    );

    r.put(
      '/v1/internal/accounts/:userId/card-on-file',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'setCardOnFile',
          summary: 'Record that a card is on file',
          description: 'Sets the flag once and grants 4,000 community credits once ever; repeating it changes nothing. No request body. The card is never charged automatically.',
          params: userIdParams,
          response: { 200: cardOnFileSchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => setCardOnFile(deps.db, { accountId: request.params.userId }),
    );

    await app.register(accountKeyRoutes(deps));
    await app.register(accountPurchaseRoutes(deps));
  };
}
