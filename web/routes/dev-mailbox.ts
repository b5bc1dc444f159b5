import type { FastifyPluginAsync } from 'fastify';
import type { WebContext } from '../deps.ts';

/** Development only (`npm start` without SMTP_URL runs the mail catcher): every mail the console sent, readable without signing in. */
export function devMailboxRoutes(ctx: WebContext): FastifyPluginAsync {
  return async (app) => {
    const mailbox = ctx.deps.devMailbox;
    if (!mailbox) return;
    app.get('/api/v1/dev/mailbox', async () => ({ development: true, messages: mailbox.messages() }));
  };
}
