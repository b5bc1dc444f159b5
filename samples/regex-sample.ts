import { intIn, pick, type Rng } from './random.ts';

/**
 * Produces a string that matches a JSON Schema `pattern` (ECMA-262 syntax): literals, escapes
 * (\d \w \s and their negations), classes with ranges and negation, `.`, groups (capturing,
 * non-capturing, named), alternation and all quantifiers. Anchors and lookarounds generate
 * nothing; the caller verifies the result with a real RegExp and retries with other draws.
 */

type Node =
  | { t: 'seq'; items: Node[] }
  | { t: 'alt'; options: Node[] }
  | { t: 'set'; chars: string[] }
  | { t: 'repeat'; node: Node; min: number; max: number }
  | { t: 'empty' };

const PRINTABLE = Array.from({ length: 0x7e - 0x20 + 1 }, (_, i) => String.fromCharCode(0x20 + i));
const DIGITS = PRINTABLE.filter((c) => c >= '0' && c <= '9');
const WORD = PRINTABLE.filter((c) => /\w/.test(c));
const SPACE = [' '];
/** Marks an open-ended quantifier (*, +, {n,}); how far it goes is decided per draw. */
const OPEN = -1;

class Parser {
  private i = 0;
  constructor(private readonly src: string) {}

  parse(): Node {
    const node = this.alternation();
    if (this.i < this.src.length) throw new Error(`unexpected '${this.src[this.i]}' at ${this.i}`);
    return node;
  }

  private peek(): string | undefined {
    return this.src[this.i];
  }

  private alternation(): Node {
    const options = [this.sequence()];
    while (this.peek() === '|') {
      this.i++;
      options.push(this.sequence());
    }
    return options.length === 1 ? options[0]! : { t: 'alt', options };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.i < this.src.length && this.peek() !== '|' && this.peek() !== ')') {
      items.push(this.quantified(this.atom()));
    }
    return { t: 'seq', items };
  }

  private quantified(node: Node): Node {
    const c = this.peek();
    let min: number;
    let max: number;
    if (c === '*') [min, max] = [0, OPEN];
    else if (c === '+') [min, max] = [1, OPEN];
    else if (c === '?') [min, max] = [0, 1];
    else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i));
      if (!m) return node; // a literal '{'
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? OPEN : Number(m[3]);
      this.i += m[0].length - 1;
    } else return node;
    this.i++;
    if (this.peek() === '?') this.i++; // lazy: same language
    return { t: 'repeat', node, min, max };
  }

  private atom(): Node {
    const c = this.src[this.i++]!;
    switch (c) {
      case '^':
      case '$':
        return { t: 'empty' };
      case '.':
        return { t: 'set', chars: PRINTABLE };
      case '[':
        return this.charClass();
      case '(':
        return this.group();
      case '\\':
        return this.escape(false);
      default:
        return { t: 'set', chars: [c] };
    }
  }

  private group(): Node {
    let lookaround = false;
    if (this.src.startsWith('?:', this.i)) this.i += 2;
    else if (/^\?<?[=!]/.test(this.src.slice(this.i))) {
      lookaround = true;
      this.i += this.src[this.i + 1] === '<' ? 3 : 2;
    } else if (this.src.startsWith('?<', this.i)) {
      this.i = this.src.indexOf('>', this.i) + 1;
    }
    const inner = this.alternation();
    if (this.src[this.i++] !== ')') throw new Error('unclosed group');
    return lookaround ? { t: 'empty' } : inner;
  }

  /** Escape after a backslash; inside a class only character escapes are meaningful. */
  private escape(inClass: boolean): Node {
    const c = this.src[this.i++];
    if (c === undefined) throw new Error('dangling backslash');
    const complement = (chars: string[]) => PRINTABLE.filter((p) => !chars.includes(p));
    switch (c) {
      case 'd':
        return { t: 'set', chars: DIGITS };
      case 'D':
        return { t: 'set', chars: complement(DIGITS) };
      case 'w':
        return { t: 'set', chars: WORD };
      case 'W':
        return { t: 'set', chars: complement(WORD) };
      case 's':
        return { t: 'set', chars: SPACE };
      case 'S':
        return { t: 'set', chars: complement([' ', '\t']) };
      case 'b':
      case 'B':
        if (inClass) return { t: 'set', chars: ['\b'] };
        return { t: 'empty' };
      case 'n':
        return { t: 'set', chars: ['\n'] };
      case 't':
        return { t: 'set', chars: ['\t'] };
      case 'r':
        return { t: 'set', chars: ['\r'] };
      case 'x': {
        const hex = this.src.slice(this.i, this.i + 2);
        this.i += 2;
        return { t: 'set', chars: [String.fromCharCode(parseInt(hex, 16))] };
      }
      case 'u': {
        const hex = this.src.slice(this.i, this.i + 4);
        this.i += 4;
        return { t: 'set', chars: [String.fromCharCode(parseInt(hex, 16))] };
      }
      default:
        if (/[1-9]/.test(c) && !inClass) throw new Error('backreferences are not supported');
        return { t: 'set', chars: [c] };
    }
  }

  private charClass(): Node {
    let negate = false;
    if (this.peek() === '^') {
      negate = true;
      this.i++;
    }
    const chars = new Set<string>();
    let first = true;
    while (this.i < this.src.length && (this.peek() !== ']' || first)) {
      first = false;
      let lo: string[];
      if (this.peek() === '\\') {
        this.i++;
        const esc = this.escape(true);
        lo = esc.t === 'set' ? esc.chars : [];
      } else lo = [this.src[this.i++]!];
      // A range a-z (but a '-' before ']' is literal).
      if (lo.length === 1 && this.peek() === '-' && this.src[this.i + 1] !== ']' && this.src[this.i + 1] !== undefined) {
        this.i++;
        let hi: string;
        if (this.peek() === '\\') {
          this.i++;
          const esc = this.escape(true);
          hi = esc.t === 'set' && esc.chars.length === 1 ? esc.chars[0]! : lo[0]!;
        } else hi = this.src[this.i++]!;
        for (let code = lo[0]!.charCodeAt(0); code <= hi.charCodeAt(0); code++) chars.add(String.fromCharCode(code));
      } else lo.forEach((ch) => chars.add(ch));
    }
    if (this.src[this.i++] !== ']') throw new Error('unclosed character class');
    const list = negate ? PRINTABLE.filter((p) => !chars.has(p)) : [...chars];
    return { t: 'set', chars: list.length > 0 ? list : ['?'] };
  }
}

/** `openExtra`: how many repetitions past its minimum an open-ended quantifier may add in this draw. */
function sample(node: Node, rng: Rng, openExtra: number): string {
  switch (node.t) {
    case 'empty':
      return '';
    case 'set':
      return pick(rng, node.chars);
    case 'seq':
      return node.items.map((n) => sample(n, rng, openExtra)).join('');
    case 'alt':
      return sample(pick(rng, node.options), rng, openExtra);
    case 'repeat': {
      let count: number;
      if (node.max === OPEN) {
        // Often the longest allowed: that is how a long minLength is reached at all.
        count = rng() < 1 / 3 ? node.min + openExtra : intIn(rng, node.min, node.min + openExtra);
      } else count = intIn(rng, node.min, node.max);
      let out = '';
      for (let k = 0; k < count; k++) out += sample(node.node, rng, openExtra);
      return out;
    }
  }
}

const parsed = new Map<string, Node>();

/**
 * A string matching `pattern` (and the length bounds, when given), or undefined when the pattern
 * uses syntax this sampler does not model or no draw satisfied every constraint.
 */
export function sampleRegex(
  pattern: string,
  rng: Rng,
  bounds: { minLength?: number | undefined; maxLength?: number | undefined } = {},
): string | undefined {
  let ast = parsed.get(pattern);
  let re: RegExp;
  try {
    re = new RegExp(pattern, 'u');
    if (!ast) {
      ast = new Parser(pattern).parse();
      parsed.set(pattern, ast);
    }
  } catch {
    return undefined;
  }
  const reach = bounds.maxLength ?? bounds.minLength ?? 8;
  for (let attempt = 0; attempt < 100; attempt++) {
    // Alternate short draws, draws as long as the length bounds, and anything in between.
    const openExtra = attempt % 3 === 0 ? 3 : attempt % 3 === 1 ? Math.max(0, reach - 1) : intIn(rng, 0, reach);
    const s = sample(ast, rng, openExtra);
    const len = [...s].length;
    if (bounds.minLength !== undefined && len < bounds.minLength) continue;
    if (bounds.maxLength !== undefined && len > bounds.maxLength) continue;
    if (re.test(s)) return s;
  }
  return undefined;
}
