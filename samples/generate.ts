import { readConstraintHint } from '../vendors/schema-dialect.ts';
import { intIn, pick, rngFor, type Rng } from './random.ts';
import { sampleRegex } from './regex-sample.ts';

/**
 * Product code shared with the tooling: the anonymous sandbox key's sample outputs come from here,
 * and the vendor simulator (tools/sim) answers with the same generator.
 *
 * Schema-driven answer generator: walks a JSON Schema and produces a value that conforms to it,
 * deterministic for the same (seed key, schema). Every node draws from its own stream keyed by
 * `seedKey` + its JSON path, so values depend on the image (through the key) and on the property
 * they fill, not on generation order. Constraint hints that an adapter moved into a description
 * (vendors/schema-dialect.ts) are honoured, as a model reading the description would.
 */

type Schema = Record<string, unknown>;

export interface GenerateOptions {
  /** Mixed into every node's stream: sim seed + hash of the image bytes. */
  seedKey: string;
}

interface Ctx {
  root: Schema;
  seedKey: string;
  path: string;
  /** Name of the property (or array owner) being filled: drives plausible strings. */
  name: string;
  depth: number;
}

const MAX_DEPTH = 12;
/** Probability of choosing null where null is allowed: most fields are filled, some are unknown. */
const NULL_CHANCE = 0.2;
/** Probability of including an optional property. */
const OPTIONAL_CHANCE = 0.7;

const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export function generate(schema: Schema, opts: GenerateOptions): unknown {
  return gen(schema, { root: schema, seedKey: opts.seedKey, path: '$', name: '', depth: 0 });
}

function rngAt(ctx: Ctx, salt = ''): Rng {
  return rngFor(`${ctx.seedKey}|${ctx.path}|${salt}`);
}

function resolveRef(ref: string, root: Schema): Schema {
  if (!ref.startsWith('#')) throw new Error(`only local $ref is supported, got ${ref}`);
  let node: unknown = root;
  for (const raw of ref.slice(1).split('/').filter(Boolean)) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    node = isObject(node) ? node[key] : undefined;
  }
  if (!isObject(node)) throw new Error(`unresolvable $ref ${ref}`);
  return node;
}

/** Flattens $ref, allOf and description hints into one node. */
function normalise(input: unknown, ctx: Ctx): Schema {
  if (input === true || input === undefined) return {};
  if (!isObject(input)) return {};
  let node: Schema = input;
  if (typeof node.$ref === 'string') {
    const { $ref, ...rest } = node;
    node = { ...normalise(resolveRef($ref as string, ctx.root), ctx), ...rest };
  }
  const hint = readConstraintHint(node.description);
  if (hint) node = { ...hint, ...node };
  if (Array.isArray(node.allOf)) {
    const { allOf, ...rest } = node;
    let merged: Schema = rest;
    for (const part of allOf) {
      const p = normalise(part, ctx);
      merged = {
        ...merged,
        ...p,
        properties: { ...(isObject(merged.properties) ? merged.properties : {}), ...(isObject(p.properties) ? p.properties : {}) },
        required: [...new Set([...(Array.isArray(merged.required) ? merged.required : []), ...(Array.isArray(p.required) ? p.required : [])])],
      };
    }
    node = merged;
  }
  return node;
}

function gen(input: unknown, ctx: Ctx): unknown {
  const node = normalise(input, ctx);
  if ('const' in node) return node.const;
  if (Array.isArray(node.enum) && node.enum.length > 0) return pick(rngAt(ctx, 'enum'), node.enum);

  const branches = Array.isArray(node.anyOf) ? node.anyOf : Array.isArray(node.oneOf) ? node.oneOf : undefined;
  if (branches && branches.length > 0) {
    const { anyOf: _a, oneOf: _o, ...outer } = node;
    const isNull = (b: unknown) => isObject(b) && b.type === 'null';
    const nonNull = branches.filter((b) => !isNull(b));
    const rng = rngAt(ctx, 'branch');
    const chooseNull = nonNull.length < branches.length && (nonNull.length === 0 || rng() < NULL_CHANCE || ctx.depth > MAX_DEPTH);
    if (chooseNull) return null;
    const branch = normalise(pick(rng, nonNull), ctx);
    // Outer keywords (description, hints) apply to the chosen branch too.
    return gen({ ...outer, ...branch }, ctx);
  }

  const type = chooseType(node, ctx);
  switch (type) {
    case 'null':
      return null;
    case 'boolean':
      return rngAt(ctx, 'bool')() < 0.5;
    case 'integer':
      return genInteger(node, ctx);
    case 'number':
      return genNumber(node, ctx);
    case 'array':
      return genArray(node, ctx);
    case 'object':
      return genObject(node, ctx);
    default:
      return genString(node, ctx);
  }
}

function chooseType(node: Schema, ctx: Ctx): string {
  const t = node.type;
  if (typeof t === 'string') return t;
  if (Array.isArray(t) && t.length > 0) {
    const types = t.filter((x): x is string => typeof x === 'string');
    const nonNull = types.filter((x) => x !== 'null');
    const rng = rngAt(ctx, 'type');
    if (nonNull.length < types.length && (nonNull.length === 0 || rng() < NULL_CHANCE || ctx.depth > MAX_DEPTH)) return 'null';
    return pick(rng, nonNull);
  }
  if (isObject(node.properties) || node.additionalProperties !== undefined) return 'object';
  if (node.items !== undefined || node.prefixItems !== undefined) return 'array';
  if (node.minimum !== undefined || node.maximum !== undefined) return 'number';
  return 'string';
}

// ---------------------------------------------------------------- numbers

/**
 * The allowed range narrowed to a plausible window for the property's name (a year between 1950
 * and 2024, a confidence in 0..1), so `z.int()`'s ±2^53 bounds do not produce absurd values.
 */
function bounds(node: Schema, integer: boolean, ctx: Ctx): [number, number] {
  const step = integer ? 1 : 0.01;
  let lo = num(node.minimum) ?? -Infinity;
  let hi = num(node.maximum) ?? Infinity;
  const exLo = num(node.exclusiveMinimum);
  const exHi = num(node.exclusiveMaximum);
  if (exLo !== undefined) lo = Math.max(lo, exLo + step);
  if (exHi !== undefined) hi = Math.min(hi, exHi - step);
  const [defLo, defHi] = defaultRange(ctx.name, integer);
  const winLo = Math.max(lo, defLo);
  const winHi = Math.min(hi, defHi);
  if (winLo <= winHi) return [winLo, winHi];
  // The plausible window lies outside the allowed range: use a window as wide at the nearest bound.
  const width = defHi - defLo;
  if (defHi < lo) return [lo, Math.min(hi, lo + width)];
  return [Math.max(lo, hi - width), hi];
}

function defaultRange(name: string, integer: boolean): [number, number] {
  const n = name.toLowerCase();
  if (/year/.test(n)) return [1950, 2024];
  if (/month/.test(n)) return [1, 12];
  if (/day/.test(n)) return [1, 28];
  if (/count|number|num|qty|quantity|people|persons|faces/.test(n)) return [0, 12];
  if (!integer && /confidence|score|probability|ratio|likelihood|fraction|share|percent/.test(n)) return [0, 1];
  return [0, 100];
}

function genInteger(node: Schema, ctx: Ctx): number {
  const [lo, hi] = bounds(node, true, ctx);
  const min = Math.ceil(lo);
  const max = Math.floor(hi);
  const rng = rngAt(ctx, 'int');
  const multiple = num(node.multipleOf);
  if (multiple && Number.isInteger(multiple) && multiple > 0) {
    const first = Math.ceil(min / multiple);
    const last = Math.floor(max / multiple);
    if (first <= last) return intIn(rng, first, last) * multiple;
  }
  return max < min ? min : intIn(rng, min, max);
}

function genNumber(node: Schema, ctx: Ctx): number {
  const [lo, hi] = bounds(node, false, ctx);
  const rng = rngAt(ctx, 'num');
  const multiple = num(node.multipleOf);
  if (multiple && multiple > 0) {
    const first = Math.ceil(lo / multiple);
    const last = Math.floor(hi / multiple);
    if (first <= last) return Number((intIn(rng, first, last) * multiple).toPrecision(12));
  }
  if (hi <= lo) return lo;
  // Two decimals reads like a model's answer; clamp so rounding never leaves the range.
  const value = Math.round((lo + rng() * (hi - lo)) * 100) / 100;
  return Math.min(hi, Math.max(lo, value));
}

// ---------------------------------------------------------------- arrays and objects

function genArray(node: Schema, ctx: Ctx): unknown[] {
  const prefix = Array.isArray(node.prefixItems) ? node.prefixItems : [];
  const min = num(node.minItems) ?? 0;
  const max = num(node.maxItems) ?? Math.max(min, prefix.length) + 3;
  const rng = rngAt(ctx, 'len');
  // Mostly non-empty: an empty list exercises little downstream.
  const lo = Math.max(min, Math.min(1, max));
  let count = ctx.depth > MAX_DEPTH ? min : intIn(rng, lo, Math.min(max, lo + 3));
  if (node.items === false) count = Math.min(count, prefix.length);
  const out: unknown[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < count; i++) {
    const child: Ctx = { ...ctx, path: `${ctx.path}[${i}]`, depth: ctx.depth + 1 };
    const itemSchema = i < prefix.length ? prefix[i] : node.items;
    let value = gen(itemSchema, child);
    if (node.uniqueItems === true) {
      // An enum is drawn without replacement; anything else is redrawn from other streams.
      const choices = enumOf(itemSchema, ctx)?.filter((c) => !seen.has(JSON.stringify(c)));
      if (choices && choices.length > 0 && seen.has(JSON.stringify(value))) value = pick(rngAt(child, 'unique'), choices);
      for (let retry = 1; seen.has(JSON.stringify(value)) && retry < 20; retry++) {
        value = gen(itemSchema, { ...child, path: `${child.path}#${retry}` });
      }
      if (seen.has(JSON.stringify(value))) {
        if (out.length >= min) break;
      }
      seen.add(JSON.stringify(value));
    }
    out.push(value);
  }
  return out;
}

function enumOf(schema: unknown, ctx: Ctx): unknown[] | undefined {
  const node = normalise(schema, ctx);
  if ('const' in node) return [node.const];
  return Array.isArray(node.enum) ? node.enum : undefined;
}

function genObject(node: Schema, ctx: Ctx): Record<string, unknown> {
  const properties = isObject(node.properties) ? node.properties : {};
  const required = new Set(Array.isArray(node.required) ? node.required.filter((r): r is string => typeof r === 'string') : []);
  const out: Record<string, unknown> = {};
  const rng = rngAt(ctx, 'optional');
  for (const [key, sub] of Object.entries(properties)) {
    const include = required.has(key) || (ctx.depth <= MAX_DEPTH && rng() < OPTIONAL_CHANCE);
    if (!include) continue;
    out[key] = gen(sub, { ...ctx, path: `${ctx.path}.${key}`, name: key, depth: ctx.depth + 1 });
  }
  // Required names without a property schema (allowed by JSON Schema) still need a value.
  for (const key of required) {
    if (!(key in out)) out[key] = gen({}, { ...ctx, path: `${ctx.path}.${key}`, name: key, depth: ctx.depth + 1 });
  }
  // A map-like object (no fixed properties) gets a couple of entries.
  if (Object.keys(properties).length === 0 && isObject(node.additionalProperties) && ctx.depth <= MAX_DEPTH) {
    const count = intIn(rngAt(ctx, 'map'), 1, 2);
    for (let i = 0; i < count; i++) {
      const key = `${pick(rngAt(ctx, `key${i}`), NOUNS)}${i}`;
      out[key] = gen(node.additionalProperties, { ...ctx, path: `${ctx.path}.${key}`, name: key, depth: ctx.depth + 1 });
    }
  }
  return out;
}

// ---------------------------------------------------------------- strings

const ADJECTIVES = [
  'weathered', 'sunlit', 'faded', 'crisp', 'muted', 'vivid', 'overcast', 'grainy', 'candid', 'quiet',
  'crowded', 'rustic', 'modern', 'vintage', 'golden', 'misty', 'shadowed', 'bright', 'narrow', 'open',
];
const NOUNS = [
  'harbor', 'street', 'portrait', 'doorway', 'garden', 'skyline', 'courtyard', 'market', 'hillside', 'kitchen',
  'bicycle', 'lighthouse', 'meadow', 'staircase', 'window', 'facade', 'bridge', 'orchard', 'station', 'shoreline',
];
const VERBS = ['frames', 'faces', 'catches', 'shows', 'overlooks', 'borders', 'leads to', 'reflects'];
const COUNTRIES = ['France', 'Japan', 'Canada', 'Italy', 'Norway', 'Mexico', 'Kenya', 'Portugal', 'Chile', 'Germany'];
const CITIES = ['Lisbon', 'Kyoto', 'Montreal', 'Bergen', 'Oaxaca', 'Nairobi', 'Lyon', 'Valparaíso', 'Hamburg', 'Turin'];
const LANGUAGES = ['en', 'fr', 'de', 'ja', 'es', 'pt', 'it'];

const title = (w: string) => w.charAt(0).toUpperCase() + w.slice(1);

function sentence(rng: Rng): string {
  return `${title(pick(rng, ['a', 'the', 'one']))} ${pick(rng, ADJECTIVES)} ${pick(rng, NOUNS)} ${pick(rng, VERBS)} the ${pick(rng, ADJECTIVES)} ${pick(rng, NOUNS)}.`;
}

function plausibleText(name: string, rng: Rng): string {
  const n = name.toLowerCase();
  if (/colou?r|hex/.test(n)) return `#${Array.from({ length: 6 }, () => pick(rng, [...'0123456789abcdef'])).join('')}`;
  if (/country/.test(n)) return pick(rng, COUNTRIES);
  if (/city|town|place/.test(n)) return pick(rng, CITIES);
  if (/lang/.test(n)) return pick(rng, LANGUAGES);
  if (/year/.test(n)) return String(intIn(rng, 1950, 2024));
  if (/date/.test(n)) return isoDate(rng);
  if (/url|uri|link|href/.test(n)) return `https://example.com/${pick(rng, NOUNS)}/${intIn(rng, 1, 999)}`;
  if (/email/.test(n)) return `${pick(rng, NOUNS)}@example.com`;
  if (/description|summary|caption|reasoning|evidence|explanation|notes?$|text|alt|rationale|comment|observation/.test(n)) {
    const count = intIn(rng, 1, 2);
    return Array.from({ length: count }, () => sentence(rng)).join(' ');
  }
  if (/name|title|label|make|model|brand|species|category|kind|type|subject|object|item/.test(n)) {
    const noun = title(pick(rng, NOUNS));
    return rng() < 0.5 ? noun : `${title(pick(rng, ADJECTIVES))} ${noun}`;
  }
  return `${pick(rng, ADJECTIVES)} ${pick(rng, NOUNS)}`;
}

const pad2 = (n: number) => String(n).padStart(2, '0');

function isoDate(rng: Rng): string {
  return `${intIn(rng, 1950, 2024)}-${pad2(intIn(rng, 1, 12))}-${pad2(intIn(rng, 1, 28))}`;
}

function isoTime(rng: Rng): string {
  return `${pad2(intIn(rng, 0, 23))}:${pad2(intIn(rng, 0, 59))}:${pad2(intIn(rng, 0, 59))}Z`;
}

function formatted(format: string, rng: Rng): string | undefined {
  const hex = (len: number) => Array.from({ length: len }, () => pick(rng, [...'0123456789abcdef'])).join('');
  switch (format) {
    case 'date':
      return isoDate(rng);
    case 'date-time':
      return `${isoDate(rng)}T${isoTime(rng)}`;
    case 'time':
      return isoTime(rng);
    case 'duration':
      return `PT${intIn(rng, 1, 59)}M`;
    case 'email':
    case 'idn-email':
      return `${pick(rng, NOUNS)}.${pick(rng, ADJECTIVES)}@example.com`;
    case 'hostname':
    case 'idn-hostname':
      return `${pick(rng, NOUNS)}.example.com`;
    case 'ipv4':
      return Array.from({ length: 4 }, () => intIn(rng, 1, 254)).join('.');
    case 'ipv6':
      return `2001:db8::${hex(4)}`;
    case 'uri':
    case 'url':
    case 'iri':
    case 'uri-reference':
    case 'iri-reference':
      return `https://example.com/${pick(rng, NOUNS)}/${intIn(rng, 1, 999)}`;
    case 'uuid':
      return `${hex(8)}-${hex(4)}-4${hex(3)}-${pick(rng, [...'89ab'])}${hex(3)}-${hex(12)}`;
    default:
      return undefined;
  }
}

function fitLength(s: string, min: number | undefined, max: number | undefined, rng: Rng): string {
  let out = s;
  while (min !== undefined && [...out].length < min) out = `${out} ${pick(rng, NOUNS)}`;
  if (max !== undefined && [...out].length > max) out = [...out].slice(0, max).join('').trimEnd();
  while (min !== undefined && [...out].length < min) out += 'x';
  return out;
}

function genString(node: Schema, ctx: Ctx): string {
  const rng = rngAt(ctx, 'str');
  const minLength = num(node.minLength);
  const maxLength = num(node.maxLength);
  const pattern = typeof node.pattern === 'string' ? node.pattern : undefined;
  const format = typeof node.format === 'string' ? formatted(node.format, rng) : undefined;
  const candidate = fitLength(format ?? plausibleText(ctx.name, rng), minLength, maxLength, rng);
  if (pattern === undefined) return candidate;
  if (safeTest(pattern, candidate)) return candidate;
  return sampleRegex(pattern, rngAt(ctx, 'pattern'), { minLength, maxLength }) ?? candidate;
}

function safeTest(pattern: string, s: string): boolean {
  try {
    return new RegExp(pattern, 'u').test(s);
  } catch {
    return false;
  }
}

/**
 * Valid JSON that violates the schema (the sim's `schema-invalid` failure): drop a required
 * property, else add one the schema forbids, else answer with the wrong root type.
 */
export function violate(schema: Schema, valid: unknown, conforms: (v: unknown) => boolean): unknown {
  const candidates: unknown[] = [];
  if (isObject(valid)) {
    const required = Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : [];
    const first = required[0];
    if (first !== undefined) {
      const { [first]: _dropped, ...rest } = valid;
      candidates.push(rest);
    }
    candidates.push({ ...valid, unexpectedSimulatedField: true });
  }
  candidates.push(['not', 'an', 'object'], 'not an object');
  return candidates.find((c) => !conforms(c)) ?? candidates[candidates.length - 1];
}
