import type { FastifyPluginAsync } from 'fastify';
import { requireMember } from '../../accounts/workspaces.ts';
import type { WebContext } from '../deps.ts';

/** Where the console's pages upload batch photos (tus 1.0), through the API's upload service. */
export const CONSOLE_UPLOADS_PATH = '/api/v1/uploads';

/**
 * Resumable uploads (tus) from the console's pages, through the upload service the API mounts too
 * (uploads/service.ts): a person uploads into a workspace where they may start batches (owners and
 * admins: a batch spends its credits), within UPLOAD_QUOTA_BYTES of their own in workspaces that never
 * bought credits, and within the workspace's account quota.
 *
 * Registered without a scope of its own (`skip-override`, as fastify-plugin marks a plugin): the tus
 * body parser (`application/offset+octet-stream`) stays the whole console's, as it was before the
 * routes were split by area.
 */
export function uploadRoutes(ctx: WebContext): FastifyPluginAsync {
  const plugin: FastifyPluginAsync = async (app) => {
    const pipeline = ctx.deps.batches?.pipeline;
    if (!pipeline) return;
    const mayStart = (personId: string, workspaceId: string) => requireMember(pipeline.db, personId, workspaceId, ['owner', 'admin']);
    pipeline.uploads.registerConsole(app, { path: CONSOLE_UPLOADS_PATH, signedIn: ctx.signedIn, mayStart, personQuotaBytes: ctx.deps.config.UPLOAD_QUOTA_BYTES });
  };
  return Object.assign(plugin, { [Symbol.for('skip-override')]: true });
}
