import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { FileStore } from '@tus/file-store';
import { S3Store } from '@tus/s3-store';
import { Server } from '@tus/server';
import type { DataStore } from '@tus/utils';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../core/config.ts';

/**
 * The tus 1.0 glue of the product (@tus/server), for both doors of the upload service
 * (uploads/service.ts): the API's uploads for Bearer keys and the console's batch uploads for
 * signed-in people. Each door names its path and its authorization; the fastify glue (bytes left
 * unparsed for tus to stream, the caller handed to tus's hooks, the hijack) is here once.
 */

type TusMethod = 'POST' | 'HEAD' | 'PATCH' | 'DELETE';

/** Who a request handed to tus acts for (its hooks see the Node request behind theirs). */
const callers = new WeakMap<IncomingMessage, Record<string, unknown>>();

/** The caller `mount` attached to the Node request behind a tus hook's Request. */
export function callerOf<T extends Record<string, unknown>>(req: Request): T | undefined {
  const node = (req as Request & { runtime?: { node?: { req?: IncomingMessage } } }).runtime?.node?.req;
  return node ? (callers.get(node) as T | undefined) : undefined;
}

/** The value of one key of a tus Upload-Metadata header ("key base64,key2 base64"). */
export function metadataValue(header: string | undefined, key: string): string | null {
  for (const pair of (header ?? '').split(',')) {
    const [k, v] = pair.trim().split(' ');
    if (k === key) return v === undefined ? '' : Buffer.from(v, 'base64').toString('utf8');
  }
  return null;
}

/** A tus server with the options both doors share: relative Locations, no cross-origin access. */
export function tusServer(opts: Omit<ConstructorParameters<typeof Server>[0], 'relativeLocation' | 'allowedOrigins'>): Server {
  return new Server({ relativeLocation: true, allowedOrigins: [], ...opts });
}

/**
 * Serve a tus server's routes on a fastify app: POST `path` creates, HEAD/PATCH/DELETE
 * `path/:id` act on one upload. `authorize` runs first (it throws the door's own refusals, in the
 * door's envelope) and returns the caller tus's hooks read with `callerOf`, or `null` when it
 * answered the request itself.
 */
export function mountTus(
  app: FastifyInstance,
  server: Server,
  opts: {
    path: string;
    routeConfig?: Record<string, unknown>;
    authorize: (request: FastifyRequest, reply: FastifyReply, id: string | null) => Promise<Record<string, unknown> | null>;
    /** The OpenAPI description of each method's route; undocumented (hidden) without one. */
    schemas?: Partial<Record<TusMethod, Record<string, unknown>>>;
    /**
     * The door's answer to tus's own refusals (412, 400, 409 …, plain text by default), given the
     * status, tus's message and the request id: the status to send and its body.
     */
    errorBody?: (status: number, message: string, requestId: string) => { status: number; body: string };
  },
): void {
  if (opts.errorBody) {
    const errorBody = opts.errorBody;
    const requestIds = new AsyncLocalStorage<string>();
    const write = (server as unknown as { write: (context: unknown, headers: Headers, status: number, body?: string) => Promise<Response> }).write.bind(server);
    (server as unknown as { write: typeof write }).write = (context, headers, status, body = '') => {
      // A 503 says when to come back, as the API's other 503s do (db/unavailable.ts).
      if (status === 503 && !headers.has('Retry-After')) headers.set('Retry-After', '2');
      if (status < 400 || body.startsWith('{')) return write(context, headers, status, body);
      headers.set('Content-Type', 'application/json; charset=utf-8');
      const answer = errorBody(status, body.trim(), requestIds.getStore() ?? '');
      return write(context, headers, answer.status, answer.body);
    };
    const handle = server.handle.bind(server);
    server.handle = ((req: IncomingMessage, res: import('node:http').ServerResponse) => requestIds.run(String((req as IncomingMessage & { id?: string }).id ?? ''), () => handle(req, res))) as typeof server.handle;
  }
  // tus sends bytes as application/offset+octet-stream: left unread for tus to stream to its store.
  app.addContentTypeParser('application/offset+octet-stream', (_request, _payload, done) => done(null));
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    // The upload tus acts on must be the one authorized (tus reads the id from the URL its own way;
    // a second id hidden in the query string must not slip through).
    const id = request.method === 'POST' ? null : request.url.slice(opts.path.length + 1);
    const caller = await opts.authorize(request, reply, id);
    if (caller === null) return reply;
    callers.set(request.raw, caller);
    (request.raw as IncomingMessage & { id?: string }).id = request.id;
    // tus writes the answer itself: the request id header goes on the raw response.
    reply.raw.setHeader('x-request-id', request.id);
    reply.hijack();
    await server.handle(request.raw, reply.raw);
    return reply;
  };
  const config = opts.routeConfig ?? {};
  const schema = (method: TusMethod) => opts.schemas?.[method] ?? { hide: true };
  app.route({ method: 'POST', url: opts.path, config, handler, schema: schema('POST') });
  for (const method of ['HEAD', 'PATCH', 'DELETE'] as const) {
    // A HEAD route is documented only when asked (fastify's automatic HEAD of a GET is not).
    const documented = method === 'HEAD' && opts.schemas?.HEAD ? { ...config, swagger: { exposeHeadRoute: true } } : config;
    app.route({ method, url: `${opts.path}/:id`, config: documented, handler, schema: schema(method) });
  }
}

/**
 * Where unfinished uploads live, by the configured blob store: the S3-compatible bucket (so any
 * API or console process on any host continues any upload), or a directory beside the local blob
 * directory (processes of one host).
 */
export function uploadDatastore(config: Pick<Config, 'BLOB_STORE' | 'BLOB_DIR' | 'S3_BUCKET' | 'S3_ENDPOINT' | 'S3_REGION' | 'S3_FORCE_PATH_STYLE' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY'>, expirationMs: number): DataStore {
  if (config.BLOB_STORE === 's3') {
    return new S3Store({
      expirationPeriodInMilliseconds: expirationMs,
      s3ClientConfig: {
        bucket: config.S3_BUCKET!,
        region: config.S3_REGION,
        ...(config.S3_ENDPOINT ? { endpoint: config.S3_ENDPOINT } : {}),
        forcePathStyle: config.S3_FORCE_PATH_STYLE,
        ...(config.S3_ACCESS_KEY_ID && config.S3_SECRET_ACCESS_KEY ? { credentials: { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY } } : {}),
      },
    });
  }
  return new FileStore({ directory: path.join(path.dirname(path.resolve(config.BLOB_DIR)), `${path.basename(config.BLOB_DIR)}-uploads`), expirationPeriodInMilliseconds: expirationMs });
}
