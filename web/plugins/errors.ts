import type { FastifyInstance } from 'fastify';
import { AppError } from '../../core/errors.ts';
import { registerErrorHandling, sendError } from '../../api/plugins/errors.ts';

/**
 * The API's error envelope for every refusal of the console's server, and its not-found answer:
 * with the built front end, every page of the single-page app is index.html (any GET outside
 * /api/); unknown /api paths stay 404 in the envelope.
 */
export function registerConsoleErrors(app: FastifyInstance, opts: { serveUi: boolean }): void {
  registerErrorHandling(app, {
    notFound: (request, reply) => {
      if (opts.serveUi && request.method === 'GET' && !request.url.startsWith('/api/')) {
        return reply.header('cache-control', 'no-cache').type('text/html; charset=utf-8').sendFile('index.html');
      }
      return sendError(reply, request, new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}`));
    },
  });
}
