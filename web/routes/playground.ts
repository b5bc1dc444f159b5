import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { requireMember } from '../../accounts/workspaces.ts';
import type { Principal } from '../../auth/authenticate.ts';
import { AppError, validationFailed } from '../../core/errors.ts';
import { recordConsoleRequest } from '../../requestlog/repository.ts';
import { previewAnalysis } from '../../analysis/preview.ts';
import { analyze } from '../../analysis/service.ts';
import { SHA256_HEX } from '../../images/blobstore.ts';
import { LENS_CREDITS } from '../../credits/price-book.ts';
import { LENSES, outputFields } from '../../lenses/index.ts';
import { STACKS } from '../../lenses/stacks.ts';
import type { WebContext } from '../deps.ts';
import { parse } from '../plugins/validation.ts';
const lensChoice = {
  preset: z.string().min(1).max(100).optional(),
  modules: z.array(z.string().min(1).max(100)).min(1).max(50).optional(),
};
const previewBody = z.strictObject({ sha256: z.string().regex(SHA256_HEX, 'must be 64 lowercase hex characters'), ...lensChoice });
/** The base64 of a photo up to 10 MB, as the API's analyze takes it. */
const MAX_PLAYGROUND_BASE64 = 14_000_000;
const runBody = z.strictObject({ mode: z.enum(['test', 'live']), imageBase64: z.string().min(1).max(MAX_PLAYGROUND_BASE64), ...lensChoice });

/**
 * The console's Playground (docs/decisions.md "The console's Playground"):
 * - `POST …/playground/preview {sha256, preset?|modules?}`: which lenses would run on that photo and
 *   what they would cost (analysis/preview.ts: the resolution, the registry and the delta plan the
 *   analyze path bills with). Free; nothing is reserved. Every member may ask.
 * - `POST …/playground/analyze {mode: test|live, imageBase64, preset?|modules?}`: the analyze use case
 *   (analysis/service.ts) for the workspace, as a key of that kind would call it: `test` answers the
 *   sandbox's fixtures for free, `live` is billed exactly as the API bills (delta, reservation, settle).
 *   The console holds no key secret (keys are shown once), so it calls the use case, not the API.
 */
export function playgroundRoutes(ctx: WebContext): FastifyPluginAsync {
  const { memberOf } = ctx;
  const deps = { db: ctx.deps.db, pipeline: ctx.deps.batches?.pipeline };
  return async (app) => {
    const base = '/api/v1/workspaces/:workspaceId/playground';
    const member = async (request: FastifyRequest) => (await memberOf(request)).workspaceId;

    // What the Playground offers: the lenses a caller may pick with their price per photo, and the
    // photo stacks (the vehicle report takes several photos of one vehicle: the batches' business).
    app.get(`${base}/catalog`, async (request, reply) => {
      await member(request);
      return reply.header('cache-control', 'no-store').send({
        lenses: LENSES.filter((l) => !l.internal).map((l) => ({ name: l.name, description: l.description, credits: l.billable ? LENS_CREDITS : 0, fields: outputFields(l) })),
        stacks: STACKS.filter((st) => st.name !== 'vehicle-condition').map((st) => ({ name: st.name, description: st.description, modules: [...st.lenses] })),
        run: Boolean(deps.pipeline),
      });
    });

    app.post(`${base}/preview`, async (request, reply) => {
      const workspaceId = await member(request);
      const body = parse('body', previewBody, request.body);
      const { sha256, ...choice } = body;
      return reply.header('cache-control', 'no-store').send(await previewAnalysis(deps.db, workspaceId, { sha256, ...choice }));
    });

    const pipeline = deps.pipeline;
    if (!pipeline) return;
    app.post(`${base}/analyze`, { bodyLimit: MAX_PLAYGROUND_BASE64 + 64 * 1024 }, async (request, reply) => {
      const { person, workspaceId } = await memberOf(request);
      const { mode, imageBase64, ...choice } = parse('body', runBody, request.body);
      // A live run spends the workspace's credits: owners and admins only, as batches, keys and
      // purchases; any member may run the free test mode (docs/decisions.md, "The console's Playground").
      if (mode === 'live') await requireMember(deps.db, person.id, workspaceId, ['owner', 'admin']);
      // What the preview cannot price is not run either: the vehicle stack is the batches' business.
      if (choice.preset === 'vehicle-condition') throw validationFailed('preset: the vehicle-condition stack is not run in the Playground (it takes several photos of one vehicle; submit a vehicle batch)');
      const principal: Principal = {
        keyId: `console_playground_${mode}`,
        keyHash: '',
        accountId: workspaceId,
        kind: mode,
        sandbox: mode === 'test',
        anonymous: false,
      };
      const requestId = `req_console_${randomBytes(12).toString('hex')}`;
      const startedAt = Date.now();
      const logged = { userId: workspaceId, mode, requestId };
      let answer;
      try {
        answer = await analyze(pipeline, principal, { imageBase64, ...choice } as Parameters<typeof analyze>[2], requestId, startedAt);
      } catch (err) {
        // Logged like the API's refusals: status, code and envelope (the error plugin answers it).
        const e = err instanceof AppError ? err : null;
        const status = e?.status ?? 500;
        const code = e?.code ?? 'INTERNAL_ERROR';
        const envelope = JSON.stringify({ error: { code, message: e?.message ?? 'Internal error', retryable: status >= 500 || status === 429, requestId } });
        await recordConsoleRequest(deps.db, { ...logged, status, errorCode: code, credits: null, latencyMs: Date.now() - startedAt, analysisId: null, error: envelope }).catch(() => undefined);
        throw err;
      }
      await recordConsoleRequest(deps.db, { ...logged, status: 200, errorCode: null, credits: answer.usage.creditsCharged ?? 0, latencyMs: Date.now() - startedAt, analysisId: answer.id, error: null });
      return reply.header('cache-control', 'no-store').header('x-request-id', requestId).send(answer);
    });
  };
}
