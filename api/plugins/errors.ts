import http from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { AppError, envelope } from '../../core/errors.ts';
import { isDatabaseUnavailable } from '../../db/unavailable.ts';
import { newRequestId } from '../request-id.ts';

/** Human message for a request validation failure, naming the field. */
function validationMessage(err: FastifyError & { validation?: unknown; validationContext?: string }): string {
  const issues = Array.isArray(err.validation) ? (err.validation as Array<{ instancePath?: string; message?: string; params?: { issue?: { path?: unknown[] } } }>) : [];
  const where = err.validationContext ?? 'body';
  const parts = issues.slice(0, 5).map((i) => {
    const path = i.params?.issue?.path?.map(String).join('.') ?? (i.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
    return `${where}${path ? '.' + path : ''}: ${i.message ?? 'invalid'}`;
  });
  return parts.length ? parts.join('; ') : err.message;
}

/** The 413 of a body over its route's limit: larger photos go by resumable upload instead. */
const BODY_TOO_LARGE =
  'Request body exceeds the size limit of this endpoint: upload large or many photos with POST /v1/uploads (tus, resumable), then send their uploadId instead of the bytes';

/** Map anything thrown to an AppError; unknown faults become 500 without internals. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const e = err as FastifyError & { validation?: unknown; validationContext?: string; status?: number };
  if (hasZodFastifySchemaValidationErrors(e) || e?.validation) return new AppError('VALIDATION_FAILED', validationMessage(e));
  switch (e?.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported Content-Type: send application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE', BODY_TOO_LARGE);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('VALIDATION_FAILED', 'Request body is empty: send a JSON object');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('VALIDATION_FAILED', 'Malformed JSON body');
    case 'FST_ERR_BAD_URL':
      return new AppError('VALIDATION_FAILED', 'Malformed request path: invalid percent-encoding');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new AppError('VALIDATION_FAILED', 'A path parameter is longer than the router accepts (100 characters)');
    default:
      break;
  }
  if (e instanceof SyntaxError || e?.statusCode === 400) return new AppError('VALIDATION_FAILED', `Malformed request: ${e.message}`);
  if (e?.statusCode === 404) return new AppError('NOT_FOUND', 'Not found');
  if (isDatabaseUnavailable(err)) {
    return new AppError('SERVICE_UNAVAILABLE', 'The database is unreachable for a moment (or every connection to it is busy): send the same request again (same x-request-id) shortly', {
      headers: { 'retry-after': '2' },
      cause: err,
    });
  }
  if (e?.statusCode === 413) return new AppError('PAYLOAD_TOO_LARGE', BODY_TOO_LARGE);
  if (e?.statusCode === 415) return new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported Content-Type: send application/json');
  return new AppError('INTERNAL_ERROR', 'Internal server error');
}

export function sendError(reply: FastifyReply, request: FastifyRequest, appErr: AppError): FastifyReply {
  if (appErr.headers) for (const [k, v] of Object.entries(appErr.headers)) reply.header(k, v);
  return reply.code(appErr.status).type('application/json; charset=utf-8').send(envelope(appErr, request.id));
}

export function registerErrorHandling(app: FastifyInstance, opts: { notFound?: (request: FastifyRequest, reply: FastifyReply) => unknown } = {}): void {
  // Node answers an Expect other than 100-continue with an empty 417 unless someone listens;
  // RFC 9110 lets a server ignore it, so the request is served like any other.
  app.server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => app.server.emit('request', req, res));
  app.setErrorHandler((err, request, reply) => {
    const appErr = toAppError(err);
    if (appErr.status >= 500) {
      request.log.error({ err, code: appErr.code, serialization: isResponseSerializationError(err) }, 'request failed');
    } else {
      // The cause (a decoder's own words, say) is for operators; the caller reads the message.
      let root: unknown = appErr.cause;
      while (root instanceof Error && root.cause !== undefined) root = root.cause;
      const cause = root instanceof Error ? root.message : root === undefined ? undefined : String(root);
      request.log.info({ code: appErr.code, msg: appErr.message, ...(cause ? { cause } : {}) }, 'request rejected');
    }
    return sendError(reply, request, appErr);
  });
  app.setNotFoundHandler(
    opts.notFound ?? ((request, reply) => sendError(reply, request, new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}`))),
  );
}

/** Fastify's `frameworkErrors`: the router's own refusals (bad URL, over-long parameter) in our envelope. */
export function frameworkErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const appErr = toAppError(err);
  request.log.info({ code: appErr.code, msg: appErr.message }, 'request rejected');
  // No onRequest hook ran for this request: set its id header here.
  void sendError(reply.header('x-request-id', request.id), request, appErr);
}

/**
 * Fastify's `clientErrorHandler`: Node's HTTP parser refused the bytes before there was a request
 * (bad method or header, conflicting lengths, headers over 16 KB, too slow). Answered in our
 * envelope with a fresh request id, then the connection is closed, as Node does.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const appErr =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new AppError('HEADERS_TOO_LARGE', 'Request line and headers exceed the 16 KB limit')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new AppError('REQUEST_TIMEOUT', 'The request did not arrive in time')
        : new AppError('VALIDATION_FAILED', 'Malformed HTTP request');
  const requestId = newRequestId();
  const body = JSON.stringify(envelope(appErr, requestId));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${appErr.status} ${http.STATUS_CODES[appErr.status]}\r\ncontent-type: application/json; charset=utf-8\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
