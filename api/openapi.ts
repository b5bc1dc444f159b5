import type { FastifyInstance } from 'fastify';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { createJsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { ERROR_STATUS, type ErrorCode } from '../core/errors.ts';

/**
 * The OpenAPI documents. Routes declare their own schemas (zod), summaries and operationIds;
 * this module adds what is the same for every route (headers every response carries, the error
 * responses a status can hold, the shared error response) and splits the result in two:
 *
 * - the public document (GET /v1/openapi.json, /v1/docs, openapi/lenstack.json): Bearer-key
 *   and unauthenticated operations, what a generated client should be made from;
 * - the internal document (GET /v1/internal/openapi.json with the internal secret,
 *   openapi/internal.json): the server-to-server operations authenticated by `x-internal-secret`.
 */

/** The description's own version (docs/contract.md "Versioning" 2). */
export const OPENAPI_VERSION = '1.1.0';

/** A query parameter only the internal-secret method reads: left out of the public document. */
export const INTERNAL_ONLY_PARAMETER = 'x-lenstack-internal-only';

type Json = Record<string, unknown>;
interface Parameter extends Json {
  name: string;
  in: string;
  required?: boolean;
  schema?: Json;
}
interface MediaType extends Json {
  schema?: Json;
}
interface Response extends Json {
  description?: string;
  headers?: Record<string, Json>;
  content?: Record<string, MediaType>;
}
type Security = Array<Record<string, string[]>>;
interface Operation extends Json {
  operationId?: string;
  tags?: string[];
  security?: Security;
  /** The route's own, then the shared ones by reference (`{ $ref }`, no name of its own). */
  parameters?: Parameter[];
  responses?: Record<string, Response>;
}
export interface OpenApiDocument extends Json {
  openapi: string;
  info: Json;
  paths: Record<string, Record<string, Operation>>;
  components: Json & { schemas?: Record<string, Json>; securitySchemes?: Record<string, Json>; headers?: Record<string, Json> };
  tags?: Array<{ name: string; description: string }>;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

const BEARER = 'bearer';
const INTERNAL = 'internalSecret';

const SECURITY_SCHEMES = {
  [BEARER]: { type: 'http', scheme: 'bearer', description: 'API key: `svc_live_…` (production) or `svc_test_…` (sandbox: fixtures, nothing billed).' },
  [INTERNAL]: { type: 'apiKey', in: 'header', name: 'x-internal-secret', description: 'The shared internal secret (server-to-server only, never in a client).' },
} as const;

const PUBLIC_TAGS = [
  { name: 'analyze', description: 'Run lenses on a photo (or up to 50). Lenses already run on the same photo bill nothing.' },
  { name: 'lookup', description: 'Find earlier results in your photo registry, by image or by fingerprint. Free.' },
  { name: 'photos', description: 'Your photo registry: erase a photo with its lens records and, once nothing else keeps them, its bytes.' },
  { name: 'enrich', description: 'Write cached lens output into a photo’s EXIF, IPTC and XMP metadata.' },
  { name: 'batches', description: 'Up to 10,000 photos through the same lenses, run in the background.' },
  { name: 'uploads', description: 'Resumable photo uploads (tus 1.0): upload once, then name the photo by its uploadId in any request. Free; counted against a per-account quota; expire unused after 24 h.' },
  { name: 'catalog', description: 'The lenses and stacks this service offers.' },
  { name: 'credits', description: 'Your credit balance.' },
  { name: 'meta', description: 'Health, discovery and the description for AI agents. No authentication.' },
];

const INTERNAL_TAGS = [
  { name: 'accounts', description: 'Users, e-mail verification, card on file, API keys and credit packs, for the web dashboard.' },
  { name: 'keys', description: 'The API key cache of every API process.' },
  { name: 'credits', description: 'Any user’s credit balance.' },
];

/** Response headers, as components: every response names them by reference. */
const HEADERS: Record<string, Json> = {
  RequestId: {
    description:
      'The request id: the caller’s own `x-request-id` when it matches `^[A-Za-z0-9._:-]{1,128}$`, otherwise one minted by the server (`req_` + 24 hex). ' +
      'On the analyze endpoints it is also the idempotency key, per account: the same id sent again with the same request answers the first answer again (the work runs and bills once; while the first is still running, the second waits for it), ' +
      'the same id with a different request is 409 `REQUEST_ID_CONFLICT`, and a request refused before any work started frees its id. `POST /v2/enrich` bills a retry with the same id once; `POST /v1/batches` answers the same id and body with the batch the first submission made.',
    required: true,
    schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  },
  RateLimitLimit: {
    description: 'Requests allowed in the window of the limit closest to being reached (draft-ietf-httpapi-ratelimit-headers). Absent when the limiter is unavailable (the service then fails open).',
    schema: { type: 'integer', minimum: 0 },
  },
  RateLimitRemaining: { description: 'Requests left in that window.', schema: { type: 'integer', minimum: 0 } },
  RateLimitReset: { description: 'Seconds until that window admits a request again.', schema: { type: 'integer', minimum: 0 } },
  RateLimitPolicy: {
    description: 'Every limit that applies to this request, as `limit;w=window-seconds`, comma-separated (e.g. `600;w=60, 300;w=60`).',
    schema: { type: 'string' },
  },
  RetryAfter: { description: 'Whole seconds until the request would be admitted (never 0).', required: true, schema: { type: 'integer', minimum: 1 } },
  RetryAfterOptional: { description: 'When present: whole seconds to wait before sending the request again.', schema: { type: 'integer', minimum: 1 } },
  CacheControl: { description: 'Always `no-store, private`: a credit shortfall is personal and changes with every purchase.', required: true, schema: { type: 'string', const: 'no-store, private' } },
};

const headerRef = (name: keyof typeof HEADERS & string) => ({ $ref: `#/components/headers/${name}` });

/** The request header every route reads: a client sets it to make a retry safe. */
const REQUEST_ID_PARAMETER = {
  name: 'x-request-id',
  in: 'header',
  required: false,
  description:
    'Your id for this request, echoed in the `x-request-id` response header and `requestId` of errors; honoured when it matches `^[A-Za-z0-9._:-]{1,128}$`, else replaced. ' +
    'On POST /v1/analyze and /v2/analyze it makes a retry safe: the same id with the same request gets the first answer again and is billed once; the same id with a different request is 409 `REQUEST_ID_CONFLICT`.',
  schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
};

/** Registration options of @fastify/swagger: the whole document, both halves, before the split. */
export function swaggerOptions(): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Lenstack API',
        version: OPENAPI_VERSION,
        description:
          'Photo analysis with AI vision: lenses and stacks, a per-user photo registry with delta billing, free lookup, metadata enrichment and prepaid credits.\n\n' +
          'Every error is `{ "error": { "code", "message", "retryable", "requestId" } }` (`ErrorEnvelope`); `code` is one of a fixed list. Every response carries `x-request-id`.',
      },
      // A template a generated client fills in with its deployment's address (first: what generators
      // take), then the relative form; /v1/docs serves the document with `/` alone (api/app.ts).
      servers: [
        { url: '{origin}', description: 'Your Lenstack deployment', variables: { origin: { default: 'http://localhost:8080', description: 'Scheme, host and port of the API (`npm start`: http://localhost:8080)' } } },
        { url: '/', description: 'The deployment that serves this document' },
      ],
      components: { securitySchemes: { ...SECURITY_SCHEMES } },
    },
    // A transform of its own for each app: the package's shared one keeps the schemas it derived
    // from the registry while the registry's size is unchanged, so an app built after the registry
    // was filled again (the test suite does, docs/decisions.md "Test run time") got the old ones.
    transform: createJsonSchemaTransform({}),
    transformObject: (input) => finishDocument(jsonSchemaTransformObject(input) as unknown as OpenApiDocument) as never,
  };
}

function* operations(doc: OpenApiDocument): Generator<[path: string, method: string, op: Operation]> {
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (op) yield [path, method, op];
    }
  }
}

const schemesOf = (op: Operation): Set<string> => new Set((op.security ?? []).flatMap((req) => Object.keys(req)));

/** The codes a status can carry, for the response's description. */
function codesFor(status: number): ErrorCode[] {
  return (Object.keys(ERROR_STATUS) as ErrorCode[]).filter((c) => ERROR_STATUS[c] === status);
}

const STATUS_TEXT: Record<string, string> = { '200': 'OK', '201': 'Created', '202': 'Accepted' };

const errorContent = () => ({ 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } });

/** Headers, descriptions and the shared error responses, on every documented operation. */
export function finishDocument(doc: OpenApiDocument): OpenApiDocument {
  doc.components.headers = { ...HEADERS };
  doc.components.parameters = { RequestId: REQUEST_ID_PARAMETER };
  for (const [, , op] of operations(doc)) {
    op.parameters = [...(op.parameters ?? []), { $ref: '#/components/parameters/RequestId' } as unknown as Parameter];
    const schemes = schemesOf(op);
    // Key-authenticated routes are rate limited (docs/contract.md "Limits"); the rest are not.
    const limited = schemes.has(BEARER);
    // No authentication: say so, rather than leave a generator to guess.
    if (!op.security) op.security = [];
    const responses = (op.responses ??= {});
    // Keys are rate limited, and so are wrong internal secrets (per client IP, the right one then too).
    if (schemes.size > 0 && !responses['429']) responses['429'] = { content: errorContent() };
    if (schemes.size > 0 && !responses['401']) responses['401'] = { content: errorContent() };
    for (const [status, response] of Object.entries(responses)) {
      const code = Number(status);
      const headers: Record<string, Json> = { 'x-request-id': headerRef('RequestId') };
      if (limited && (code < 300 || code === 429)) {
        headers['RateLimit-Limit'] = headerRef('RateLimitLimit');
        headers['RateLimit-Remaining'] = headerRef('RateLimitRemaining');
        headers['RateLimit-Reset'] = headerRef('RateLimitReset');
        headers['RateLimit-Policy'] = headerRef('RateLimitPolicy');
      }
      if (code === 429) headers['Retry-After'] = headerRef('RetryAfter');
      if (code === 503) headers['Retry-After'] = headerRef('RetryAfterOptional');
      if (code === 402) headers['Cache-Control'] = headerRef('CacheControl');
      response.headers = { ...response.headers, ...headers };
      if (code >= 400) {
        const codes = codesFor(code);
        response.description = codes.length > 0 ? `Error: ${codes.map((c) => `\`${c}\``).join(' or ')}` : 'Error';
      } else if (!response.description || response.description === 'Default Response') {
        response.description = STATUS_TEXT[status] ?? 'Success';
      }
    }
    responses['default'] = {
      description:
        'Any other error, in the same envelope: e.g. 500 `INTERNAL_ERROR`, 503 `SERVICE_UNAVAILABLE` (with `Retry-After` when a retry will do: shutting down, busy, the pipeline briefly unreachable), 408, 413, 415, 431. `retryable` says whether sending it again can help.',
      headers: { 'x-request-id': headerRef('RequestId'), 'Retry-After': headerRef('RetryAfterOptional') },
      content: errorContent(),
    };
  }
  return doc;
}

/** The public and the internal document, from the whole one. */
export function splitDocument(whole: OpenApiDocument): { public: OpenApiDocument; internal: OpenApiDocument } {
  const pub = structuredClone(whole);
  const internal = structuredClone(whole);
  pub.paths = {};
  internal.paths = {};
  for (const [path, method, op] of operations(whole)) {
    // @fastify/swagger suffixes a documented HEAD route's operationId (GET and HEAD of one path
    // could clash); a HEAD-only operation (tus, GET /v1/uploads/{id} does not exist) keeps its name.
    if (method === 'head' && op.operationId?.endsWith('-head') && !whole.paths[path]?.get) op.operationId = op.operationId.slice(0, -'-head'.length);
    const schemes = schemesOf(op);
    if (!schemes.has(INTERNAL)) {
      (pub.paths[path] ??= {})[method] = structuredClone(op);
      continue;
    }
    // An operation either method authenticates (GET /v1/usage): the key form in the public
    // document, the secret form (with its own parameters, required there) in the internal one.
    if (schemes.has(BEARER)) {
      const p = structuredClone(op);
      p.security = p.security!.filter((req) => !(INTERNAL in req));
      p.parameters = p.parameters?.filter((param) => !isInternalOnly(param));
      (pub.paths[path] ??= {})[method] = p;
    }
    const i = structuredClone(op);
    i.security = i.security!.filter((req) => INTERNAL in req);
    for (const param of i.parameters ?? []) if (isInternalOnly(param)) param.required = true;
    // The internal-secret method is not rate limited: no RateLimit-* headers there.
    for (const response of Object.values(i.responses ?? {})) {
      for (const h of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy']) delete response.headers?.[h];
    }
    (internal.paths[path] ??= {})[method] = i;
  }
  pub.components.securitySchemes = { [BEARER]: SECURITY_SCHEMES[BEARER] };
  internal.components.securitySchemes = { [INTERNAL]: SECURITY_SCHEMES[INTERNAL] };
  pub.tags = PUBLIC_TAGS;
  internal.tags = INTERNAL_TAGS;
  internal.info = {
    ...internal.info,
    title: 'Lenstack internal API',
    description:
      'Server-to-server operations for the web dashboard and operators, authenticated by the `x-internal-secret` header. Not for SDK users: the public API is described in the public document (GET /v1/openapi.json).',
  };
  for (const doc of [pub, internal]) {
    for (const [, , op] of operations(doc)) for (const param of op.parameters ?? []) stripMarker(param);
    hoistPropertyRefs(doc);
    doc.components.schemas = plainer(doc.components.schemas) as Record<string, Json>;
    doc.paths = plainer(doc.paths) as OpenApiDocument['paths'];
    tidyComponents(doc);
    const used = new Set([...operations(doc)].flatMap(([, , op]) => op.tags ?? []));
    doc.tags = doc.tags!.filter((t) => used.has(t.name));
    const unknown = [...used].filter((t) => !doc.tags!.some((d) => d.name === t));
    if (unknown.length > 0) throw new Error(`OpenAPI tags without a description: ${unknown.join(', ')} (add them to api/openapi.ts)`);
  }
  return { public: pub, internal };
}

function isInternalOnly(param: Parameter): boolean {
  return param[INTERNAL_ONLY_PARAMETER] === true || param.schema?.[INTERNAL_ONLY_PARAMETER] === true;
}

function stripMarker(param: Parameter): void {
  delete param[INTERNAL_ONLY_PARAMETER];
  if (param.schema) delete param.schema[INTERNAL_ONLY_PARAMETER];
}

/** Every `$ref` string under a value. */
function* refs(value: unknown): Generator<string> {
  if (Array.isArray(value)) {
    for (const v of value) yield* refs(v);
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') yield v;
      else yield* refs(v);
    }
  }
}

function rewriteRefs(value: unknown, rename: Map<string, string>): unknown {
  if (Array.isArray(value)) return value.map((v) => rewriteRefs(v, rename));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' ? (rename.get(v) ?? v) : rewriteRefs(v, rename)]));
  }
  return value;
}

const SCHEMA_REF = '#/components/schemas/';
const PROPERTY_REF = /^#\/components\/schemas\/([^/]+)\/properties\/([^/]+)$/;

/**
 * A reference into another component's property (`#/components/schemas/DatingOutput/properties/
 * estimatedDate`: how each lens field is shared by the lens's component and the analyze outputs)
 * becomes a component of its own (`DatingEstimatedDate`) that both name. Generators resolve
 * references to whole components only (oapi-codegen refuses deeper ones).
 */
function hoistPropertyRefs(doc: OpenApiDocument): void {
  // A hoisted field may itself point into another component: repeat until none does.
  for (;;) {
    const schemas = (doc.components.schemas ??= {});
    const deep = [...new Set([...refs(doc.paths), ...refs(schemas)])].filter((r) => PROPERTY_REF.test(r));
    if (deep.length === 0) return;
    const rename = new Map<string, string>();
    for (const ref of deep) {
      const [, parent, property] = PROPERTY_REF.exec(ref)!;
      const owner = schemas[parent!] as { properties?: Record<string, Json> } | undefined;
      const target = owner?.properties?.[property!];
      if (!target) throw new Error(`OpenAPI: ${ref} names no property`);
      const stem = parent!.replace(/Output$/, '');
      const field = property![0]!.toUpperCase() + property!.slice(1);
      // `people` of PeopleOutput is `People…` already: no `PeoplePeopleCount`.
      let name = field.startsWith(stem) ? field : `${stem}${field}`;
      if (schemas[name]) name = `${parent}${field}`;
      if (schemas[name]) throw new Error(`OpenAPI: cannot name ${ref}: ${name} exists`);
      schemas[name] = target;
      owner!.properties![property!] = { $ref: `${SCHEMA_REF}${name}` };
      rename.set(ref, `${SCHEMA_REF}${name}`);
    }
    doc.components.schemas = rewriteRefs(schemas, rename) as Record<string, Json>;
    doc.paths = rewriteRefs(doc.paths, rename) as OpenApiDocument['paths'];
  }
}

/** JSON Schema's integers as zod writes them when no bound was given: not a bound anyone meant. */
const SAFE_MIN = Number.MIN_SAFE_INTEGER;

/**
 * Shapes every generator reads the same way:
 * - "X or null" as one flat union: `type: [T, "null"]` for a plain type, `anyOf: [..., {type: null}]`
 *   for references, never a union inside a union (which generators turn into opaque raw values);
 * - an object that is "one of these components" as that union alone, without a `type` beside it;
 * - integers: the API has no negative ones (every integer is a count, an index, credits, a
 *   distance or a duration), so an integer without a lower bound of its own is `minimum: 0`
 *   rather than the lowest safe integer zod writes.
 */
function plainer(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(plainer);
  if (!value || typeof value !== 'object') return value;
  let v = Object.fromEntries(Object.entries(value).map(([k, x]) => [k, plainer(x)])) as Json;
  if (v.type === 'integer') {
    if (v.minimum === undefined || v.minimum === SAFE_MIN) v.minimum = 0;
  }
  if (v.type === 'object' && Array.isArray(v.anyOf) && !v.properties) {
    const { type: _type, ...rest } = v;
    v = rest;
  }
  const union = v.anyOf;
  if (Array.isArray(union) && union.length === 2 && union.some(isNull)) {
    const other = union.find((u) => !isNull(u)) as Json;
    const { anyOf: _anyOf, ...outer } = v;
    if (typeof other.type === 'string' && !other.anyOf && !other.oneOf && !other.$ref) {
      v = { ...outer, ...other, type: [other.type, 'null'] };
      if (Array.isArray(v.enum)) v.enum = [...v.enum, null];
    } else if (Array.isArray(other.anyOf) && !other.properties) {
      v = { ...outer, anyOf: [...(other.anyOf as Json[]), { type: 'null' }] };
    }
  }
  return v;
}

const isNull = (u: unknown): boolean => !!u && typeof u === 'object' && (u as Json).type === 'null' && Object.keys(u).length === 1;
const HEADER_REF = '#/components/headers/';

/**
 * Keep only the schemas the document's operations reach, and name each by what it is: the zod
 * provider registers every schema twice (`X` for responses, `XInput` for requests, which differ
 * only where a default applies); a document that uses only the input form calls it `X`.
 */
function tidyComponents(doc: OpenApiDocument): void {
  const all = doc.components.schemas ?? {};
  const reached = new Set<string>();
  const pending = [...refs(doc.paths), ...refs(doc.components.headers)];
  while (pending.length > 0) {
    const ref = pending.pop()!;
    if (!ref.startsWith(SCHEMA_REF)) continue;
    const name = ref.slice(SCHEMA_REF.length).split('/')[0]!;
    if (reached.has(name) || !all[name]) continue;
    reached.add(name);
    pending.push(...refs(all[name]));
  }
  const rename = new Map<string, string>();
  for (const name of reached) {
    const plain = name.replace(/Input$/, '');
    if (plain !== name && !reached.has(plain)) rename.set(`${SCHEMA_REF}${name}`, `${SCHEMA_REF}${plain}`);
  }
  const schemas: Record<string, Json> = {};
  for (const name of Object.keys(all).filter((n) => reached.has(n))) {
    const target = rename.get(`${SCHEMA_REF}${name}`)?.slice(SCHEMA_REF.length) ?? name;
    schemas[target] = rewriteRefs(all[name], rename) as Json;
  }
  doc.components.schemas = Object.fromEntries(Object.keys(schemas).sort().map((n) => [n, schemas[n]!]));
  const headersUsed = new Set([...refs(doc.paths)].filter((r) => r.startsWith(HEADER_REF)).map((r) => r.slice(HEADER_REF.length)));
  doc.components.headers = Object.fromEntries(Object.entries(doc.components.headers ?? {}).filter(([name]) => headersUsed.has(name)));
  doc.paths = rewriteRefs(doc.paths, rename) as OpenApiDocument['paths'];
}

const documents = new WeakMap<FastifyInstance, { public: OpenApiDocument; internal: OpenApiDocument }>();

/** This app's two documents, built once (after ready: every route is registered by then). */
export function openApiDocuments(app: FastifyInstance): { public: OpenApiDocument; internal: OpenApiDocument } {
  let docs = documents.get(app);
  if (!docs) {
    docs = splitDocument(app.swagger() as unknown as OpenApiDocument);
    documents.set(app, docs);
  }
  return docs;
}
