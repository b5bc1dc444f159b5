import { ERROR_STATUS, isErrorCode } from '../../../core/errors.ts';

/**
 * What a hostile request got back, the checks every such answer must pass (error envelope (docs/contract.md),
 * request id), and the per-category summary table the suites print.
 */

export interface Answer {
  status: number;
  body: string;
  headers: Record<string, unknown>;
  /** Wall time from sending to the whole answer, in ms. */
  ms: number;
}

export interface Envelope {
  code: string;
  message: string;
  retryable: boolean;
  requestId: string;
}

/**
 * The error envelope (docs/contract.md) of an error answer, or what is wrong with it: not JSON, fields missing,
 * a code outside our enum or one that means another status, a request id unlike x-request-id.
 */
export function envelopeOf(a: Answer): { envelope: Envelope } | { problem: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(a.body);
  } catch {
    return { problem: `status ${a.status} with a non-JSON body: ${JSON.stringify(a.body.slice(0, 200))}` };
  }
  const e = (parsed as { error?: Record<string, unknown> } | null)?.error;
  if (!e || typeof e.code !== 'string' || typeof e.message !== 'string' || typeof e.retryable !== 'boolean' || typeof e.requestId !== 'string' || e.requestId === '') {
    return { problem: `status ${a.status} without the error envelope: ${a.body.slice(0, 200)}` };
  }
  if (!isErrorCode(e.code)) return { problem: `status ${a.status} with an unknown error code ${e.code}` };
  if (ERROR_STATUS[e.code] !== a.status) return { problem: `status ${a.status} with code ${e.code}, which means ${ERROR_STATUS[e.code]}` };
  const header = a.headers['x-request-id'];
  if (header !== undefined && header !== e.requestId) {
    return { problem: `x-request-id ${String(header)} differs from error.requestId ${e.requestId}` };
  }
  return { envelope: { code: e.code, message: e.message, retryable: e.retryable, requestId: e.requestId } };
}

export interface Row {
  category: string;
  cases: number;
  /** Requests sent for those cases (a case may go to several endpoints). */
  requests: number;
  /**
   * Taken in: 2xx, or an image that passed intake and was stopped later (a spec 502 from the
   * analysis pipeline, enrich's 404 for a photo not in the registry, exiftool refusing a write).
   */
  accepted: number;
  /** Refusals. */
  c4xx: number;
  /** 5xx not counted as accepted (any 5xx but the analysis pipeline's spec 502). */
  c5xx: number;
  /** Connections the loopback canary counted during this category (SSRF only). */
  canary?: number;
  maxMs: number;
  /** Slowest 4xx answer, in ms: how fast refusals are. */
  maxRefusalMs: number;
  /** Peak RSS of the API process, MB (image corpus only). */
  peakRssMb?: number;
}

/** Counts answers per category, in first-seen order. */
export class Tally {
  private readonly rows = new Map<string, Row>();

  row(category: string): Row {
    let r = this.rows.get(category);
    if (!r) {
      r = { category, cases: 0, requests: 0, accepted: 0, c4xx: 0, c5xx: 0, maxMs: 0, maxRefusalMs: 0 };
      this.rows.set(category, r);
    }
    return r;
  }

  addCase(category: string): void {
    this.row(category).cases += 1;
  }

  /** `accepted`: the request got through intake even if its status says otherwise (see Row). */
  add(category: string, a: Pick<Answer, 'status' | 'ms'>, opts: { accepted?: boolean } = {}): void {
    const r = this.row(category);
    r.requests += 1;
    if (a.status < 400 || opts.accepted) r.accepted += 1;
    else if (a.status >= 500) r.c5xx += 1;
    else {
      r.c4xx += 1;
      r.maxRefusalMs = Math.max(r.maxRefusalMs, a.ms);
    }
    r.maxMs = Math.max(r.maxMs, a.ms);
  }

  all(): Row[] {
    return [...this.rows.values()];
  }

  total(): Row {
    const t: Row = { category: 'total', cases: 0, requests: 0, accepted: 0, c4xx: 0, c5xx: 0, maxMs: 0, maxRefusalMs: 0 };
    for (const r of this.rows.values()) {
      t.cases += r.cases;
      t.requests += r.requests;
      t.accepted += r.accepted;
      t.c4xx += r.c4xx;
      t.c5xx += r.c5xx;
      t.maxMs = Math.max(t.maxMs, r.maxMs);
      t.maxRefusalMs = Math.max(t.maxRefusalMs, r.maxRefusalMs);
      if (r.canary !== undefined) t.canary = (t.canary ?? 0) + r.canary;
      if (r.peakRssMb !== undefined) t.peakRssMb = Math.max(t.peakRssMb ?? 0, r.peakRssMb);
    }
    return t;
  }

  /** A Markdown table: category → cases, requests, accepted, 4xx, 5xx, canary, max latency (all, 4xx), peak RSS. */
  format(title: string): string {
    const rows = [...this.all(), this.total()];
    const head = ['category', 'cases', 'requests', 'accepted', '4xx', '5xx', 'canary', 'max ms', 'max 4xx ms', 'peak RSS MB'];
    const cells = rows.map((r) => [
      r.category,
      String(r.cases),
      String(r.requests),
      String(r.accepted),
      String(r.c4xx),
      String(r.c5xx),
      r.canary === undefined ? '–' : String(r.canary),
      r.maxMs.toFixed(0),
      r.maxRefusalMs.toFixed(0),
      r.peakRssMb === undefined ? '–' : r.peakRssMb.toFixed(0),
    ]);
    const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
    const line = (c: string[]) => `| ${c.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join(' | ')} |`;
    const rule = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
    return [`\n${title}`, line(head), rule, ...cells.map(line)].join('\n');
  }
}
