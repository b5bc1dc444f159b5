import type { FastifyReply } from 'fastify';
import { AppError } from '../core/errors.ts';

/**
 * Aborted when the caller's connection closes before its answer was sent: work still queued for it
 * (a HEIC/BMP decode waiting for a slot, images/foreign-decode.ts) is dropped instead of running
 * for nobody (docs/reliability.md "A disconnected caller in the decode queue").
 */
export function connectionSignal(reply: FastifyReply): AbortSignal {
  const connection = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) connection.abort(clientGone());
  });
  return connection.signal;
}

/** Why a request's work stopped when its client went away (nobody reads the answer). */
export const clientGone = () => new AppError('REQUEST_TIMEOUT', 'The client closed the connection before the answer; nothing of the request was kept');
