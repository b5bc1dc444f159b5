import type { FastifyInstance } from 'fastify';
import { AppError } from '../../core/errors.ts';
import type { Drain } from '../drain.ts';

/**
 * Graceful shutdown on the HTTP side (api/drain.ts). Fastify's own 503 while closing is not our
 * envelope, so the app turns it off and this hook answers instead: once draining, a request that
 * still arrives on a kept-alive connection gets 503 SERVICE_UNAVAILABLE (retryable) and every
 * response closes its connection, so clients reconnect to another instance.
 */
export function registerDrain(app: FastifyInstance, drain: Drain): void {
  app.addHook('preClose', async () => drain.begin());
  app.addHook('onRequest', async () => {
    if (!drain.draining) return;
    throw new AppError('SERVICE_UNAVAILABLE', 'This server is shutting down: retry the request', {
      headers: { connection: 'close', 'retry-after': '1' },
    });
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (drain.draining) reply.header('connection', 'close');
    return payload;
  });
}
