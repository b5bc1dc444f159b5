import http from 'node:http';
import type { Prng } from '../support/prng.ts';
import { clone, Entries, Nested, RawJson, setOwn, toJson } from './json.ts';
import type { JsonSchema, Operation } from './openapi.ts';

/**
 * Seeded malformed requests for every operation of the OpenAPI document. Each request starts
 * from a valid one (a baseline body, correct parameters and credentials) and breaks one thing,
 * named by its category, so a failure points at exactly what the server mishandled.
 */

export const FUZZ_CATEGORIES = [
  'wrong types',
  'missing fields',
  'extra and prototype keys',
  'huge strings',
  'deep nesting',
  'unicode edge cases',
  'numbers at and beyond bounds',
  'arrays at and beyond limits',
  'query strings',
  'path parameters',
  'content types',
  'invalid JSON',
  'auth headers',
  'other headers',
  'methods',
  'raw HTTP',
] as const;
export type FuzzCategory = (typeof FUZZ_CATEGORIES)[number];

export interface FuzzRequest {
  category: FuzzCategory;
  op: string;
  method: string;
  /** Path and query as sent. */
  target: string;
  /** In order; a name may repeat. */
  headers: Array<[string, string]>;
  body?: Buffer;
  /** Only expressible on a raw socket (invalid methods, conflicting lengths, bad bytes…). */
  socketOnly?: boolean;
  /** Whether to add a correct Content-Length on the socket (false: the request sets its own). */
  contentLength?: boolean;
  /** What was broken, to reproduce by hand. */
  note: string;
}

export interface FuzzContext {
  ops: Operation[];
  liveKeys: string[];
  testKeys: string[];
  anonymousKey: string;
  internalSecret: string;
  /** A valid small image, base64. */
  imageBase64: string;
}

// Values that are valid where they appear but never reach anything outside: an image URL on a
// blocked documentation address (refused before any connection), ids that match no row.
const BLOCKED_URL = 'http://192.0.2.10/photo.jpg';
const NOBODY = 'usr_fuzz_nobody';
const SHA = 'ab'.repeat(32);

function baseline(op: Operation, ctx: FuzzContext): unknown {
  switch (op.id) {
    case 'POST /v1/analyze':
      return { imageBase64: ctx.imageBase64, modules: ['describe'] };
    case 'POST /v2/analyze':
      return { imageBase64: ctx.imageBase64, modules: ['describe'], extract: { prompt: 'the main colour' } };
    case 'POST /v2/lookup':
      return { images_base64: [ctx.imageBase64], threshold: 5 };
    case 'POST /v2/enrich':
      return { imageBase64: ctx.imageBase64, formats: ['xmp'] };
    case 'POST /v1/internal/evict':
      return { userId: NOBODY };
    case 'POST /v1/internal/email-verifications/verify':
      return { token: 'fuzz-token-that-matches-nothing' };
    default:
      return op.body ? sample(op.body, 0) : undefined;
  }
}

/** A valid instance of a schema (required properties only, smallest sizes). */
export function sample(s: JsonSchema, depth: number): unknown {
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  if (s.default !== undefined) return s.default;
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      if (depth < 6) for (const k of s.required ?? []) out[k] = sample(s.properties?.[k] ?? {}, depth + 1);
      return out;
    }
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => sample(s.items ?? {}, depth + 1));
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return false;
    case 'string':
      if (s.format === 'uri') return BLOCKED_URL;
      if (s.pattern === '^[0-9a-f]{64}$') return SHA;
      if (s.pattern === '^[0-9a-f]{16}$') return '0123456789abcdef';
      if (s.pattern === '^bsk_[0-9a-f]{32}$') return `bsk_${'0'.repeat(32)}`;
      return 'x'.repeat(Math.max(1, s.minLength ?? 1));
    default:
      return 'x';
  }
}

// ------------------------------------------------------------------------------------------
// Slots: every place in a body the schema describes, with the schema that applies there.

type Path = Array<string | number>;
interface Slot {
  path: Path;
  schema: JsonSchema;
  /** Free-form (`additionalProperties: {}`): anything goes, the server must still cope. */
  free: boolean;
}

const RECORD_KEYS = ['describe', 'dating', 'k'];

function slotsOf(s: JsonSchema, path: Path = [], depth = 0, out: Slot[] = []): Slot[] {
  out.push({ path, schema: s, free: Object.keys(s).length === 0 });
  if (depth >= 4) return out;
  for (const [k, v] of Object.entries(s.properties ?? {})) slotsOf(v, [...path, k], depth + 1, out);
  if (typeof s.additionalProperties === 'object') slotsOf(s.additionalProperties, [...path, RECORD_KEYS[depth % RECORD_KEYS.length]!], depth + 1, out);
  if (s.items) slotsOf(s.items, [...path, 0], depth + 1, out);
  return out;
}

function setAt(root: unknown, path: Path, value: unknown): unknown {
  if (path.length === 0) return value;
  const top: Record<string, unknown> | unknown[] = root !== null && typeof root === 'object' && !(root instanceof Nested) ? (root as Record<string, unknown>) : typeof path[0] === 'number' ? [] : {};
  let cur: Record<string | number, unknown> = top as Record<string | number, unknown>;
  for (let i = 0; i < path.length - 1; i++) {
    const k = path[i]!;
    const next = cur[k];
    if (next === null || typeof next !== 'object' || next instanceof Nested || next instanceof RawJson) {
      const made = typeof path[i + 1] === 'number' ? [] : {};
      setOwn(cur as Record<string, unknown>, String(k), made);
      cur = made as Record<string | number, unknown>;
    } else cur = next as Record<string | number, unknown>;
  }
  const last = path.at(-1)!;
  if (Array.isArray(cur) && typeof last === 'number') cur[last] = value;
  else setOwn(cur as Record<string, unknown>, String(last), value);
  return top;
}

function deleteAt(root: unknown, path: Path): unknown {
  if (path.length === 0) return undefined;
  let cur = root as Record<string | number, unknown> | undefined;
  for (const k of path.slice(0, -1)) cur = cur?.[k] as Record<string | number, unknown> | undefined;
  if (cur && typeof cur === 'object') delete cur[path.at(-1)!];
  return root;
}

const typeOf = (s: JsonSchema) => (Array.isArray(s.type) ? s.type[0] : s.type) ?? (s.enum ? typeof s.enum[0] : s.const !== undefined ? typeof s.const : undefined);

// ------------------------------------------------------------------------------------------
// Hostile values

const WRONG_TYPE_VALUES: unknown[] = [null, true, false, 0, -1, 1.5, '', 'string', [], [null], {}, { a: 1 }, [[[]]], new RawJson('1e400'), '1', 'true', 'null', [ 'describe' ]];

export const UNICODE_STRINGS = [
  '\ud800', '\udfff', 'a\udc00b\ud800', '\u0000', 'a\u0000b', 'svc_live_\u0000', '\u202eevil\u202c', '\u200f\u0645\u0631\u062d\u0628\u0627',
  '\ufeffdescribe', 'desc\u200dribe', 'describe\u200b', '\u{1F469}\u200d\u{1F469}\u200d\u{1F467}', 'e\u0301\u0301\u0301\u0301', '\uffff', '\u{10ffff}',
  '\u0085\u2028\u2029', '\ufb03', '\u{1D54F}', 'ｄｅｓｃｒｉｂｅ', 'DESCRIBE', 'İstanbul', '\u00ad', '%00', '%ud800', '\\u0000', '\r\nX-Injected: 1',
  '${jndi:ldap://192.0.2.1/a}', "'; DROP TABLE photos;--", '<script>alert(1)</script>', '../../../../etc/passwd', '\u0007\u001b[31m',
];

/** Raw byte sequences that are not UTF-8, spliced into a body's bytes at a placeholder. */
const INVALID_UTF8 = [Buffer.from([0xc0, 0xaf]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xff, 0xfe]), Buffer.from([0xf4, 0x90, 0x80, 0x80]), Buffer.from([0xe2, 0x82])];
const RAW_BYTES_MARK = '\u0001RAW\u0001';

function numbersFor(s: JsonSchema, r: Prng): unknown {
  const min = s.minimum;
  const max = s.maximum;
  const candidates: unknown[] = [0, -1, 0.5, -0.5, 1e308, -1e308, 2 ** 53 + 1, -(2 ** 63), new RawJson('-0'), new RawJson('1e400'), new RawJson('-1e400'), new RawJson('1.0'), new RawJson('1E2'), new RawJson('1e-400'), new RawJson('0.0000000000000000000000000001'), new RawJson('1' + '0'.repeat(400)), '5', ' 5', [5]];
  if (min !== undefined) candidates.push(min, min - 1, min - 0.5, min - 1e-9);
  if (max !== undefined) candidates.push(max, max + 1, max + 0.5, max + 1e-9);
  return r.pick(candidates);
}

function hugeString(s: JsonSchema, r: Prng): string {
  const lengths = [1_000_000, 1_048_577, 3_000_000, 100_000];
  if (s.maxLength !== undefined && s.maxLength < 1_000_000) lengths.push(s.maxLength + 1, s.maxLength, s.maxLength * 10);
  const n = r.pick(lengths);
  const unit = r.pick(['a', '€', '\u{1F600}', '\u0000', 'A/+=']);
  return unit.repeat(Math.ceil(n / unit.length)).slice(0, n);
}

function arrayFor(s: JsonSchema, ctx: FuzzContext, r: Prng): unknown {
  const item = () => (s.items?.format === 'uri' ? BLOCKED_URL : s.items?.enum ? s.items.enum[0] : s.items?.type === 'string' && s.items.maxLength === 67_000_000 ? ctx.imageBase64 : sample(s.items ?? {}, 1));
  const max = s.maxItems ?? 50;
  const n = r.pick([0, max, max + 1, (s.minItems ?? 0) - 1, 10_000, 100_000]);
  if (n < 0) return null;
  return r.pick([
    () => Array.from({ length: n }, item),
    () => Array.from({ length: Math.min(n, 20_000) }, () => null),
    () => Array.from({ length: Math.min(n, 1_000) }, (_, i) => r.pick([item(), i, null, [], {}, 'x'])),
    () => [Array.from({ length: 3 }, item)],
  ])();
}

// ------------------------------------------------------------------------------------------
// Requests

function fillPath(op: Operation, r: Prng, hostile: boolean): string {
  return op.path.replace(/\{(\w+)\}/g, (_m, name: string) => (hostile ? r.pick(HOSTILE_PATH_VALUES) : name === 'userId' ? NOBODY : 'key_fuzz_nobody'));
}

const HOSTILE_PATH_VALUES = [
  '%00', 'a%00b', '..', '..%2F..%2Fetc%2Fpasswd', '%2e%2e', '%2F', 'x'.repeat(129), 'x'.repeat(4_000), '%C0%AF', '%FF%FE', '%E2%80%AE', '%20', ' ',
  'usr_%F0%9F%98%80', ';', 'null', 'undefined', '__proto__', 'constructor', '%', '%zz', '%E0%A4%A', '*', '{userId}', '1e400', '-1',
];

function validQuery(op: Operation, ctx: FuzzContext, r: Prng, internal: boolean): string {
  if (op.id === 'GET /v2/lookup') return r.chance(0.5) ? `?sha256=${SHA}` : '?pHash=0123456789abcdef&threshold=5';
  if (op.id === 'GET /v1/usage') return internal ? `?userId=${NOBODY}` : r.chance(0.5) ? '?tier=starter' : '';
  void ctx;
  return '';
}

function authHeaders(op: Operation, ctx: FuzzContext, r: Prng): { headers: Array<[string, string]>; internal: boolean } {
  const bearer = (): [string, string] => ['authorization', `Bearer ${r.chance(0.5) ? r.pick(ctx.liveKeys) : r.pick(ctx.testKeys)}`];
  switch (op.auth) {
    case 'bearer':
      return { headers: [bearer()], internal: false };
    case 'internal':
      return { headers: [['x-internal-secret', ctx.internalSecret]], internal: true };
    case 'bearer-or-internal':
      return r.chance(0.7) ? { headers: [bearer()], internal: false } : { headers: [['x-internal-secret', ctx.internalSecret]], internal: true };
    default:
      return { headers: [], internal: false };
  }
}

function jsonBody(value: unknown, r: Prng): Buffer {
  const text = toJson(value);
  if (!text.includes(RAW_BYTES_MARK)) return Buffer.from(text, 'utf8');
  const parts = text.split(RAW_BYTES_MARK);
  return Buffer.concat(parts.flatMap((p, i) => (i === 0 ? [Buffer.from(p, 'utf8')] : [r.pick(INVALID_UTF8), Buffer.from(p, 'utf8')])));
}

const withBody = (ctx: FuzzContext) => ctx.ops.filter((o) => o.body !== null);

export function generate(ctx: FuzzContext, category: FuzzCategory, r: Prng): FuzzRequest {
  const pickOp = (ops: Operation[]) => r.pick(ops.length ? ops : ctx.ops);
  const bodyOps = withBody(ctx);
  const op =
    category === 'query strings' ? pickOp(ctx.ops.filter((o) => o.params.some((p) => p.in === 'query') || r.chance(0.2)))
    : category === 'path parameters' ? pickOp(ctx.ops.filter((o) => o.path.includes('{') || r.chance(0.15)))
    : category === 'auth headers' ? pickOp(ctx.ops.filter((o) => o.auth !== 'none'))
    : ['other headers', 'methods', 'raw HTTP'].includes(category) ? pickOp(ctx.ops)
    : pickOp(bodyOps);

  const auth = authHeaders(op, ctx, r);
  const req: FuzzRequest = {
    category,
    op: op.id,
    method: op.method,
    target: fillPath(op, r, false) + validQuery(op, ctx, r, auth.internal),
    headers: [...auth.headers],
    note: '',
  };
  const base = baseline(op, ctx);
  let body: unknown = base === undefined ? undefined : clone(base);
  const slots = op.body ? slotsOf(op.body) : [];
  const slotWhere = (pred: (s: Slot) => boolean) => {
    const list = slots.filter(pred);
    return list.length ? r.pick(list) : slots[0] ?? { path: [], schema: {}, free: true };
  };
  let contentType: string | null = 'application/json';
  let rawBody: Buffer | undefined;

  switch (category) {
    case 'wrong types': {
      const slot = slotWhere(() => true);
      const t = typeOf(slot.schema);
      const value = r.pick(WRONG_TYPE_VALUES.filter((v) => jsonType(v) !== t));
      body = setAt(body, slot.path, value);
      req.note = `${slot.path.join('.') || '(root)'} = ${toJson(value).slice(0, 40)}`;
      break;
    }
    case 'missing fields': {
      const choice = r.int(4);
      if (choice === 0) {
        body = {};
        req.note = 'empty object';
      } else if (choice === 1) {
        contentType = r.chance(0.5) ? 'application/json' : null;
        rawBody = Buffer.alloc(0);
        req.note = `no body (content-type ${contentType ?? 'none'})`;
      } else {
        const slot = slotWhere((s) => s.path.length > 0);
        body = deleteAt(body, slot.path);
        const parent = slots.find((s) => s.path.join('.') === slot.path.slice(0, -1).join('.'));
        if (parent?.schema.required?.length && r.chance(0.5)) for (const k of parent.schema.required) body = deleteAt(body, [...slot.path.slice(0, -1), k]);
        req.note = `without ${slot.path.join('.')}`;
      }
      break;
    }
    case 'extra and prototype keys': {
      const slot = slotWhere((s) => typeOf(s.schema) === 'object' || s.free);
      const key = r.pick(['__proto__', 'constructor', 'prototype', '__defineGetter__', 'hasOwnProperty', 'toString', 'valueOf', 'then', 'length', 'extra', '', ' ', '\u0000', 'imageurl', 'modules ', '$ref', 'x'.repeat(200)]);
      const value = r.pick<unknown>([{ polluted: true }, new Entries([['prototype', { polluted: true }]]), 'polluted', null, [1], { toString: 'x', valueOf: 1 }]);
      if (r.chance(0.25) && body && typeof body === 'object' && !Array.isArray(body)) {
        // Duplicate key: the same field twice, the second one wrong.
        const entries = Object.entries(body as Record<string, unknown>);
        const [k] = entries.length ? r.pick(entries) : ['imageBase64'];
        body = new Entries([...entries, [k, r.pick(WRONG_TYPE_VALUES)]]);
        req.note = `duplicate key ${k}`;
      } else {
        const target = slot.path.length ? (getAt(body, slot.path) ?? {}) : body ?? {};
        const obj = target !== null && typeof target === 'object' && !Array.isArray(target) && !(target instanceof Entries) ? (target as Record<string, unknown>) : {};
        setOwn(obj, key, value);
        body = setAt(body, slot.path, obj);
        req.note = `${slot.path.join('.') || '(root)'}[${JSON.stringify(key).slice(0, 30)}]`;
      }
      break;
    }
    case 'huge strings': {
      const slot = slotWhere((s) => typeOf(s.schema) === 'string' || s.free);
      const value = hugeString(slot.schema, r);
      body = setAt(body, slot.path, value);
      req.note = `${slot.path.join('.')} = ${value.length} chars of ${JSON.stringify(value.slice(0, 2))}`;
      break;
    }
    case 'deep nesting': {
      const slot = r.chance(0.5) ? slotWhere((s) => s.free) : slotWhere(() => true);
      const depth = r.pick([64, 1_000, 10_000, 100_000, 400_000]);
      const kind = r.pick(['array', 'object'] as const);
      body = setAt(body, slot.path, new Nested(depth, kind));
      req.note = `${slot.path.join('.') || '(root)'} nested ${depth} ${kind}s deep`;
      break;
    }
    case 'unicode edge cases': {
      if (r.chance(0.2)) {
        const slot = slotWhere((s) => typeOf(s.schema) === 'string');
        body = setAt(body, slot.path, `a${RAW_BYTES_MARK}b`);
        req.note = `${slot.path.join('.')} with invalid UTF-8 bytes`;
      } else if (r.chance(0.2)) {
        const slot = slotWhere((s) => typeOf(s.schema) === 'object');
        const obj = (getAt(body, slot.path) ?? {}) as Record<string, unknown>;
        const key = r.pick(UNICODE_STRINGS);
        setOwn(obj, key, 'x');
        body = setAt(body, slot.path, obj);
        req.note = `key ${JSON.stringify(key)} in ${slot.path.join('.') || '(root)'}`;
      } else {
        const slot = slotWhere((s) => typeOf(s.schema) === 'string' || s.free);
        const value = r.pick(UNICODE_STRINGS);
        body = setAt(body, slot.path, r.chance(0.3) ? `describe${value}` : value);
        req.note = `${slot.path.join('.')} = ${JSON.stringify(value)}`;
      }
      break;
    }
    case 'numbers at and beyond bounds': {
      const slot = slotWhere((s) => typeOf(s.schema) === 'integer' || typeOf(s.schema) === 'number');
      const value = numbersFor(slot.schema, r);
      body = setAt(body, slot.path, value);
      req.note = `${slot.path.join('.')} = ${toJson(value).slice(0, 40)}`;
      break;
    }
    case 'arrays at and beyond limits': {
      const slot = slotWhere((s) => typeOf(s.schema) === 'array');
      const value = arrayFor(slot.schema, ctx, r);
      body = setAt(body, slot.path, value);
      req.note = `${slot.path.join('.')} = ${Array.isArray(value) ? `${value.length} items` : toJson(value)}`;
      break;
    }
    case 'query strings': {
      const q = r.pick(QUERY_STRINGS);
      req.target = `${fillPath(op, r, false)}${q}`;
      req.note = `query ${q.slice(0, 60)}`;
      break;
    }
    case 'path parameters': {
      if (op.path.includes('{')) {
        req.target = fillPath(op, r, true) + validQuery(op, ctx, r, auth.internal);
      } else {
        req.target = r.pick([`${op.path}/`, op.path.replace('/v', '//v'), op.path.toUpperCase(), `${op.path}%00`, `${op.path}/..`, `/v1/%2e%2e${op.path}`, `${op.path};x`, `${op.path}%`, `${op.path}/${'a'.repeat(5_000)}`, `${op.path}#frag`, `${op.path}?`, op.path.replace(/\/$/, '') + '/%2F']);
      }
      req.note = `target ${req.target.slice(0, 80)}`;
      break;
    }
    case 'content types': {
      const [ct, make] = r.pick(CONTENT_TYPES);
      contentType = ct;
      if (make) rawBody = make(toJson(body ?? {}));
      req.note = `content-type ${JSON.stringify(ct)}`;
      break;
    }
    case 'invalid JSON': {
      const text = r.pick(INVALID_JSON);
      rawBody = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
      req.note = `body ${JSON.stringify(rawBody.toString('latin1').slice(0, 50))}`;
      break;
    }
    case 'auth headers': {
      const variant = r.pick(AUTH_VARIANTS)(ctx, r, op);
      req.headers = req.headers.filter(([n]) => n !== 'authorization' && n !== 'x-internal-secret');
      req.headers.push(...variant.headers);
      req.socketOnly = variant.socketOnly;
      req.note = `auth: ${variant.note}`;
      break;
    }
    case 'other headers': {
      const [headers, note, socketOnly] = r.pick(OTHER_HEADERS)(r);
      req.headers.push(...headers);
      req.socketOnly = socketOnly;
      req.note = note;
      break;
    }
    case 'methods': {
      const methods = ['PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND', 'MKCOL', 'SEARCH', 'PURGE', 'LINK', 'M-SEARCH', 'GET', 'POST'];
      const odd = ['get', 'GETT', 'G@T', 'QUERY', 'CONNECT', 'BREW', '', 'POST /v1/health'];
      if (r.chance(0.3)) {
        req.method = r.pick(odd);
        req.socketOnly = true;
      } else req.method = r.pick(methods.filter((m) => m !== op.method));
      req.note = `${JSON.stringify(req.method)} on ${op.path}`;
      break;
    }
    case 'raw HTTP': {
      const abuse = r.pick(RAW_ABUSES)(req, body === undefined ? Buffer.alloc(0) : jsonBody(body, r));
      Object.assign(req, abuse, { socketOnly: true });
      return req;
    }
  }

  if (rawBody === undefined && body !== undefined && (op.method !== 'GET' || category === 'content types')) rawBody = jsonBody(body, r);
  if (rawBody !== undefined) {
    req.body = rawBody;
    if (contentType !== null) req.headers.push(['content-type', contentType]);
  }
  return req;
}

function jsonType(v: unknown): string {
  if (v instanceof RawJson) return 'number';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function getAt(root: unknown, path: Path): unknown {
  let cur = root as Record<string | number, unknown> | undefined;
  for (const k of path) cur = cur && typeof cur === 'object' ? (cur[k] as Record<string | number, unknown> | undefined) : undefined;
  return cur;
}

const QUERY_STRINGS = [
  '?sha256=abc', `?sha256=${'AB'.repeat(32)}`, `?sha256=${'g'.repeat(64)}`, `?sha256=${'a'.repeat(65)}`, '?pHash=0123456789ABCDEF', '?pHash=0123456789abcde',
  `?sha256=${SHA}&pHash=0123456789abcdef`, '?', '?threshold=5', '?pHash=0123456789abcdef&threshold=', '?pHash=0123456789abcdef&threshold=null',
  '?pHash=0123456789abcdef&threshold=-1', '?pHash=0123456789abcdef&threshold=65', '?pHash=0123456789abcdef&threshold=5.5', '?pHash=0123456789abcdef&threshold=abc',
  '?pHash=0123456789abcdef&threshold=1e1', '?pHash=0123456789abcdef&threshold=0x10', '?pHash=0123456789abcdef&threshold=%205', '?pHash=0123456789abcdef&threshold=Infinity',
  '?pHash=0123456789abcdef&threshold=99999999999999999999999', `?sha256=${SHA}&sha256=${SHA}`, `?sha256=${SHA}&sha256=x`, '?pHash=0123456789abcdef&threshold=1&threshold=2',
  `?sha256[]=${SHA}`, `?sha256[0]=${SHA}`, `?sha256[a]=${SHA}`, '?__proto__[polluted]=1', '?constructor[prototype][polluted]=1', '?__proto__=x', '?%', '?%zz=1', '?a=%E0%A4%A',
  '?sha256=%00', `?sha256=${SHA}%00`, '?userId=%00', '?userId=a%00b', `?userId=${'x'.repeat(129)}`, '?userId=', '?userId=%F0%9F%98%80', '?userId=usr_fuzz_nobody&userId=x',
  '?tier=growth', '?tier=', '?tier=STARTER', '?tier=starter&tier=starter', '?tier=%00', '?tier[]=starter', '?unknown=1', `?x=${'y'.repeat(100_000)}`, '?a=1;b=2', '?+=+', '?&&&=&',
  '?sha256=+' + SHA, '?pHash=%300123456789abcde', '?pHash=0123456789abcdef#frag',
];

const CONTENT_TYPES: Array<[string | null, ((json: string) => Buffer) | null]> = [
  [null, null],
  ['text/plain', null],
  ['application/x-www-form-urlencoded', () => Buffer.from('imageBase64=abc&modules=describe')],
  ['multipart/form-data; boundary=----fuzz', () => Buffer.from('------fuzz\r\nContent-Disposition: form-data; name="imageBase64"\r\n\r\nabc\r\n------fuzz--\r\n')],
  ['application/json; charset=utf-16', (j) => Buffer.from(j, 'utf16le')],
  ['application/json; charset=utf-16le', (j) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(j, 'utf16le')])],
  ['application/json; charset=latin1', (j) => Buffer.from(j, 'latin1')],
  ['application/json; charset=ebcdic', null],
  ['APPLICATION/JSON', null],
  ['application/json;', null],
  ['application/json ; charset=utf-8', null],
  ['application/jsonx', null],
  ['application/vnd.api+json', null],
  ['application/problem+json', null],
  ['application/xml', () => Buffer.from('<analyze><imageBase64>x</imageBase64></analyze>')],
  ['image/png', () => Buffer.from('89504e470d0a1a0a', 'hex')],
  ['application/octet-stream', null],
  ['*/*', null],
  ['', null],
  ['json', null],
  ['application/json, text/plain', null],
  ['text/json', null],
  [';', null],
  ['application/json; boundary=x; charset=utf-8; q=0.5', null],
  [`application/json; ${'p=v; '.repeat(2_000)}`, null],
];

const INVALID_JSON: Array<string | Buffer> = [
  '{', '{"a":', '}', '[', 'nul', 'NaN', 'Infinity', '-Infinity', '{"a":1,}', "{'a':1}", '{a:1}', '/* c */ {}', '{"a":1} x', '{"a":1}{"b":2}',
  '\ufeff{"imageBase64":"x"}', '', ' ', '\n\t', 'null', 'true', '0', '"str"', '[]', '[{}]', '{"a":"\\x41"}', '{"a":"\\u12"}', '{"a":"\\ud800"}',
  '{"a":01}', '{"a":.5}', '{"a":-}', '{"a":1e}', '{"a":"unterminated}', '{"a":"line\nbreak"}', '{"a":"tab\there"}', `{"a":1${'0'.repeat(400)}}`,
  '{"__proto__":{"polluted":1}}', '{"constructor":{"prototype":{"polluted":1}}}', 'a'.repeat(1_000), '{"a":\u00a01}',
  Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d]), Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), Buffer.from([0xfe, 0xff, 0, 0x7b, 0, 0x7d]),
  Buffer.alloc(64, 0), '{"a":[' + '1,'.repeat(200_000) + '1]}',
];

type AuthVariant = (ctx: FuzzContext, r: Prng, op: Operation) => { headers: Array<[string, string]>; note: string; socketOnly?: boolean };
const KEY_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const randomKey = (prefix: string, r: Prng) => prefix + Array.from({ length: 40 }, () => KEY_CHARS[r.int(KEY_CHARS.length)]).join('');
const AUTH_VARIANTS: AuthVariant[] = [
  () => ({ headers: [], note: 'none' }),
  () => ({ headers: [['authorization', 'Bearer']], note: 'Bearer without a key' }),
  () => ({ headers: [['authorization', 'Bearer ']], note: 'Bearer and a space' }),
  (c, r) => ({ headers: [['authorization', `Bearer  ${r.pick(c.liveKeys)}`]], note: 'two spaces' }),
  (c, r) => ({ headers: [['authorization', `bearer ${r.pick(c.liveKeys)}`]], note: 'lower-case scheme' }),
  (c, r) => ({ headers: [['authorization', `BEARER ${r.pick(c.testKeys)}`]], note: 'upper-case scheme' }),
  () => ({ headers: [['authorization', 'Basic dXNlcjpwYXNz']], note: 'Basic' }),
  (c, r) => ({ headers: [['authorization', `Token ${r.pick(c.liveKeys)}`]], note: 'Token scheme' }),
  (c, r) => ({ headers: [['authorization', r.pick(c.liveKeys)]], note: 'no scheme' }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys)} extra`]], note: 'trailing word' }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys)}\t`]], note: 'trailing tab' }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys).toUpperCase()}`]], note: 'key upper-cased' }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys).slice(0, -1)}`]], note: 'key one char short' }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys)}x`]], note: 'key one char long' }),
  (_c, r) => ({ headers: [['authorization', `Bearer ${randomKey('svc_live_', r)}`]], note: 'unknown live key' }),
  (_c, r) => ({ headers: [['authorization', `Bearer ${randomKey('svc_test_', r)}`]], note: 'unknown test key' }),
  (c) => ({ headers: [['authorization', `Bearer ${c.anonymousKey}`]], note: 'anonymous sandbox key' }),
  () => ({ headers: [['authorization', 'Bearer svc_live_']], note: 'prefix only' }),
  () => ({ headers: [['authorization', `Bearer ${'x'.repeat(8_000)}`]], note: '8 KB key' }),
  () => ({ headers: [['authorization', `Bearer ${'x'.repeat(70_000)}`]], note: '70 KB key (over the 16 KB header limit)' }),
  () => ({ headers: [['authorization', 'Bearer svc_live_\u00c4\u00d6\u00dc\u00e9\u00e8\u00ea\u00eb\u00ef\u00ee\u00f4\u00f6\u00fc\u00df\u00c4\u00d6\u00dc\u00e9\u00e8\u00ea\u00eb\u00ef\u00ee\u00f4\u00f6\u00fc\u00df\u00c4\u00d6\u00dc\u00e9\u00e8\u00ea\u00eb\u00ef\u00ee\u00f4\u00f6\u00fc']], note: 'non-ASCII (latin1) key' }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys)}\u0000`]], note: 'NUL after the key', socketOnly: true }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys)}`], ['authorization', `Bearer ${r.pick(c.testKeys)}`]], note: 'two Authorization headers' }),
  (c, r) => ({ headers: [['authorization', 'Bearer garbage'], ['authorization', `Bearer ${r.pick(c.liveKeys)}`]], note: 'garbage then a valid Authorization' }),
  (c, r) => ({ headers: [['authorization', `Bearer ${r.pick(c.liveKeys).replace('_', '_\u200b')}`]], note: 'zero-width space in the key' }),
  () => ({ headers: [['authorization', `Bearer svc_live_${'\u{1F600}'.repeat(20)}`]], note: 'emoji key' }),
  (c) => ({ headers: [['x-internal-secret', c.internalSecret.slice(0, -1)]], note: 'internal secret one char short' }),
  (c) => ({ headers: [['x-internal-secret', `${c.internalSecret} `]], note: 'internal secret with a trailing space' }),
  () => ({ headers: [['x-internal-secret', '']], note: 'empty internal secret' }),
  () => ({ headers: [['x-internal-secret', 's'.repeat(10_000)]], note: '10 KB internal secret' }),
  (c) => ({ headers: [['x-internal-secret', c.internalSecret], ['x-internal-secret', 'wrong']], note: 'two internal secret headers' }),
  (c) => ({ headers: [['x-internal-secret', `${c.internalSecret}\u00e9`]], note: 'non-ASCII internal secret' }),
  (c, r) => ({ headers: [['x-internal-secret', 'wrong'], ['authorization', `Bearer ${r.pick(c.liveKeys)}`]], note: 'wrong secret beside a valid key' }),
];

type OtherHeaders = (r: Prng) => [Array<[string, string]>, string, boolean?];
const OTHER_HEADERS: OtherHeaders[] = [
  () => [[['x-request-id', 'has spaces and ünïcode']], 'invalid x-request-id'],
  () => [[['x-request-id', 'r'.repeat(129)]], '129-char x-request-id'],
  () => [[['x-request-id', '']], 'empty x-request-id'],
  () => [[['x-request-id', 'a'], ['x-request-id', 'b']], 'two x-request-id headers'],
  () => [[['x-request-id', '../../etc/passwd']], 'path in x-request-id'],
  () => [[['accept', 'application/xml']], 'accept xml'],
  () => [[['accept', '*/*;q=abc, text/html;q=']], 'malformed accept'],
  () => [[['accept-encoding', 'gzip, br, zstd, garbage;q=x']], 'accept-encoding'],
  () => [[['content-encoding', 'gzip']], 'content-encoding gzip on a plain body'],
  () => [[['content-encoding', 'br, deflate, x-unknown']], 'stacked content-encodings'],
  () => [[['x-forwarded-for', 'not-an-ip, 999.1.1.1, ::zz']], 'garbage x-forwarded-for'],
  () => [[['x-forwarded-for', Array.from({ length: 500 }, (_, i) => `10.0.${i >> 8}.${i & 255}`).join(', ')]], '500 hops of x-forwarded-for'],
  () => [[['cookie', `a=${'b'.repeat(8_000)}`]], '8 KB cookie'],
  () => [[['user-agent', 'u'.repeat(8_000)]], '8 KB user-agent'],
  () => [[['range', 'bytes=0-1,2-3']], 'range'],
  () => [[['if-none-match', '*']], 'if-none-match'],
  () => [[['expect', '100-continue']], 'expect 100-continue'],
  () => [[['expect', 'something-else']], 'unknown expectation', true],
  () => [[['connection', 'upgrade'], ['upgrade', 'websocket']], 'websocket upgrade'],
  () => [[['connection', 'keep-alive, x-request-id']], 'hop-by-hop x-request-id'],
  () => [[['host', 'evil.example']], 'foreign host'],
  () => [[['x-http-method-override', 'DELETE']], 'method override'],
  (r) => [Array.from({ length: 300 }, (_, i): [string, string] => [`x-fuzz-${i}`, String(r.int(1e6))]), '300 headers'],
  () => [[['transfer-encoding', 'gzip, chunked']], 'transfer-encoding gzip, chunked', true],
  () => [[['content-length', '-1']], 'negative content-length', true],
  () => [[['content-length', 'abc']], 'non-numeric content-length', true],
];

type RawAbuse = (req: FuzzRequest, body: Buffer) => Partial<FuzzRequest>;
const RAW_ABUSES: RawAbuse[] = [
  (q) => ({ target: `http://evil.example${q.target}`, note: 'absolute-form target' }),
  () => ({ target: '*', method: 'OPTIONS', note: 'asterisk-form target' }),
  (q) => ({ target: q.target.replace('/', '/\u00e9/'), note: 'raw non-ASCII byte in the target' }),
  (q) => ({ target: `${q.target} HTTP/1.1 extra`, note: 'spaces in the target' }),
  (q) => ({ target: `${q.target}?x=${'y'.repeat(20_000)}`, note: '20 KB request line' }),
  (q, b) => ({ headers: [...q.headers, ['content-length', String(b.length)], ['content-length', String(b.length + 1)]], body: b, contentLength: false, note: 'two different Content-Lengths' }),
  (q, b) => ({ headers: [...q.headers, ['content-length', String(b.length)], ['transfer-encoding', 'chunked']], body: b, contentLength: false, note: 'Content-Length and Transfer-Encoding' }),
  (q, b) => ({ headers: [...q.headers, ['transfer-encoding', 'chunked']], body: Buffer.concat([Buffer.from(`zz\r\n`), b, Buffer.from('\r\n0\r\n\r\n')]), contentLength: false, note: 'bad chunk size' }),
  (q, b) => ({ headers: [...q.headers, ['content-type', 'application/json'], ['transfer-encoding', 'chunked']], body: Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n0\r\nx-trailer: 1\r\n\r\n')]), contentLength: false, note: 'chunked with a trailer' }),
  (q, b) => ({ headers: [...q.headers, ['content-type', 'application/json'], ['content-length', String(Math.max(0, b.length - 5))]], body: b, contentLength: false, note: 'Content-Length shorter than the body' }),
  (q) => ({ headers: [...q.headers, ['x-folded', 'a\r\n  continued']], note: 'obsolete line folding' }),
  (q) => ({ headers: [...q.headers, ['bad header', 'x']], note: 'space in a header name' }),
  (q) => ({ headers: [...q.headers, ['x-nul', 'a\u0000b']], note: 'NUL in a header value' }),
  (q) => ({ headers: [...q.headers, ['x-latin1', '\u00e9\u00e8\u00ff']], note: 'latin1 bytes in a header value' }),
  (q) => ({ headers: [...q.headers, ['x-big', 'b'.repeat(20_000)]], note: '20 KB header' }),
  (q) => ({ headers: [...q.headers, ['', 'empty name']], note: 'header without a name' }),
  (q) => ({ headers: q.headers.filter(([n]) => n !== 'host').concat([['host', 'a'], ['host', 'b']]), note: 'two Host headers' }),
];

/** Node's HTTP methods, for requests app.inject can send (it refuses others). */
export const INJECTABLE_METHODS = new Set(http.METHODS);
