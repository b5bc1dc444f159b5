/**
 * JSON text for fuzzed bodies. Besides plain values it writes what JSON.stringify cannot or
 * will not: raw number tokens (1e400, -0, 1.0), own `__proto__` keys, duplicate keys, and
 * arbitrarily deep nesting without recursion.
 */

/** A token written verbatim (e.g. `1e400`). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** An object written with these entries in order, duplicate keys allowed. */
export class Entries {
  constructor(readonly entries: Array<[string, unknown]>) {}
}

/** `depth` levels of `[` … `]` (or `{"a":` … `}`) around a value, written iteratively. */
export class Nested {
  constructor(
    readonly depth: number,
    readonly kind: 'array' | 'object',
  ) {}
}

export function toJson(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (value instanceof Nested) {
    const open = value.kind === 'array' ? '[' : '{"a":';
    const close = value.kind === 'array' ? ']' : '}';
    return `${open.repeat(value.depth)}1${close.repeat(value.depth)}`;
  }
  if (value instanceof Entries) return `{${value.entries.map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`).join(',')}}`;
  if (Array.isArray(value)) return `[${value.map(toJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    // Own keys only, including an own "__proto__" made with defineProperty.
    return `{${Object.keys(value).map((k) => `${JSON.stringify(k)}:${toJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  if (value === undefined) return 'null';
  return JSON.stringify(value);
}

/** Sets an own property, even `__proto__`, without touching the prototype. */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, configurable: true, writable: true });
}

/** A deep copy that keeps the special value classes and own `__proto__` keys. */
export function clone<T>(value: T): T {
  if (value instanceof RawJson || value instanceof Nested) return value;
  if (value instanceof Entries) return new Entries(value.entries.map(([k, v]) => [k, clone(v)])) as T;
  if (Array.isArray(value)) return value.map(clone) as T;
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value)) setOwn(out, k, clone((value as Record<string, unknown>)[k]));
    return out as T;
  }
  return value;
}
