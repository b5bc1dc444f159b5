/**
 * Counters, gauges and histograms in the Prometheus text exposition format (version 0.0.4).
 * Written here because prom-client is not among our dependencies; only what we use: label sets
 * fixed per metric, cumulative histogram buckets, values read at scrape time.
 */

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Label values may hold anything: backslash, double quote and line feed are escaped. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** HELP text escapes backslash and line feed only. */
export function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

type LabelValues<L extends string> = Readonly<Record<L, string | number>>;

function labelPairs(names: readonly string[], values: readonly string[], extra?: [string, string]): string {
  const pairs = names.map((n, i) => `${n}="${escapeLabelValue(values[i]!)}"`);
  if (extra) pairs.push(`${extra[0]}="${escapeLabelValue(extra[1])}"`);
  return pairs.length ? `{${pairs.join(',')}}` : '';
}

interface MetricOptions<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
}

abstract class Metric<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  abstract readonly type: 'counter' | 'gauge' | 'histogram';

  constructor(opts: MetricOptions<L>) {
    if (!METRIC_NAME.test(opts.name)) throw new Error(`invalid metric name ${opts.name}`);
    const labelNames = opts.labelNames ?? [];
    for (const l of labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith('__') || l === 'le') throw new Error(`invalid label name ${l} on ${opts.name}`);
    }
    this.name = opts.name;
    this.help = opts.help;
    this.labelNames = labelNames;
  }

  /** One series per distinct label values; the key is their NUL-joined values. */
  protected key(labels: LabelValues<L>): { key: string; values: string[] } {
    const values = this.labelNames.map((n) => {
      const v = labels[n];
      if (v === undefined) throw new Error(`metric ${this.name} needs label ${n}`);
      return String(v);
    });
    return { key: values.join('\u0000'), values };
  }

  abstract samples(): string[];

  expose(): string {
    return [`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`, ...this.samples()].join('\n');
  }
}

export class Counter<L extends string = never> extends Metric<L> {
  readonly type = 'counter';
  private readonly series = new Map<string, { values: string[]; value: number }>();

  inc(labels: LabelValues<L>, by = 1): void {
    if (!(by >= 0)) throw new Error(`counter ${this.name} can only go up (got ${by})`);
    const { key, values } = this.key(labels);
    const s = this.series.get(key);
    if (s) s.value += by;
    else this.series.set(key, { values, value: by });
  }

  get(labels: LabelValues<L>): number {
    return this.series.get(this.key(labels).key)?.value ?? 0;
  }

  samples(): string[] {
    return [...this.series.values()].map((s) => `${this.name}${labelPairs(this.labelNames, s.values)} ${formatValue(s.value)}`);
  }
}

export class Gauge<L extends string = never> extends Metric<L> {
  readonly type = 'gauge';
  private readonly series = new Map<string, { values: string[]; value: number }>();

  set(labels: LabelValues<L>, value: number): void {
    const { key, values } = this.key(labels);
    this.series.set(key, { values, value });
  }

  inc(labels: LabelValues<L>, by = 1): void {
    const { key, values } = this.key(labels);
    const s = this.series.get(key);
    if (s) s.value += by;
    else this.series.set(key, { values, value: by });
  }

  dec(labels: LabelValues<L>, by = 1): void {
    this.inc(labels, -by);
  }

  get(labels: LabelValues<L>): number {
    return this.series.get(this.key(labels).key)?.value ?? 0;
  }

  samples(): string[] {
    return [...this.series.values()].map((s) => `${this.name}${labelPairs(this.labelNames, s.values)} ${formatValue(s.value)}`);
  }
}

/** A value without labels read at scrape time (process memory, CPU seconds). */
export class Sampled extends Metric<never> {
  readonly type: 'counter' | 'gauge';
  private readonly read: () => number;

  constructor(opts: { name: string; help: string; type: 'counter' | 'gauge'; read: () => number }) {
    super(opts);
    this.type = opts.type;
    this.read = opts.read;
  }

  samples(): string[] {
    return [`${this.name} ${formatValue(this.read())}`];
  }
}

export class Histogram<L extends string = never> extends Metric<L> {
  readonly type = 'histogram';
  readonly buckets: readonly number[];
  private readonly series = new Map<string, { values: string[]; counts: number[]; sum: number; count: number }>();

  constructor(opts: MetricOptions<L> & { buckets: readonly number[] }) {
    super(opts);
    const sorted = [...new Set(opts.buckets)].sort((a, b) => a - b);
    if (!sorted.length || sorted.some((b) => !Number.isFinite(b))) throw new Error(`histogram ${opts.name} needs finite buckets`);
    this.buckets = sorted;
  }

  observe(labels: LabelValues<L>, value: number): void {
    if (Number.isNaN(value)) return;
    const { key, values } = this.key(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { values, counts: new Array<number>(this.buckets.length).fill(0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    const i = this.buckets.findIndex((b) => value <= b);
    if (i >= 0) s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }

  /** Starts a timer; calling the result observes the elapsed seconds. */
  startTimer(): (labels: LabelValues<L>) => number {
    const t0 = performance.now();
    return (labels) => {
      const seconds = (performance.now() - t0) / 1000;
      this.observe(labels, seconds);
      return seconds;
    };
  }

  count(labels: LabelValues<L>): number {
    return this.series.get(this.key(labels).key)?.count ?? 0;
  }

  samples(): string[] {
    const out: string[] = [];
    for (const s of this.series.values()) {
      let cumulative = 0;
      this.buckets.forEach((b, i) => {
        cumulative += s.counts[i]!;
        out.push(`${this.name}_bucket${labelPairs(this.labelNames, s.values, ['le', formatValue(b)])} ${cumulative}`);
      });
      out.push(`${this.name}_bucket${labelPairs(this.labelNames, s.values, ['le', '+Inf'])} ${s.count}`);
      out.push(`${this.name}_sum${labelPairs(this.labelNames, s.values)} ${formatValue(s.sum)}`);
      out.push(`${this.name}_count${labelPairs(this.labelNames, s.values)} ${s.count}`);
    }
    return out;
  }
}

/** The metrics of one process, exposed in registration order. */
export class Registry {
  private readonly metrics = new Map<string, { expose(): string }>();

  private add<M extends { name: string; expose(): string }>(m: M): M {
    if (this.metrics.has(m.name)) throw new Error(`metric ${m.name} registered twice`);
    this.metrics.set(m.name, m);
    return m;
  }

  counter<L extends string = never>(opts: MetricOptions<L>): Counter<L> {
    return this.add(new Counter<L>(opts));
  }

  gauge<L extends string = never>(opts: MetricOptions<L>): Gauge<L> {
    return this.add(new Gauge<L>(opts));
  }

  histogram<L extends string = never>(opts: MetricOptions<L> & { buckets: readonly number[] }): Histogram<L> {
    return this.add(new Histogram<L>(opts));
  }

  sampled(opts: { name: string; help: string; type: 'counter' | 'gauge'; read: () => number }): Sampled {
    return this.add(new Sampled(opts));
  }

  /** The whole exposition, ending with a line feed as the format requires. */
  expose(): string {
    return [...this.metrics.values()].map((m) => m.expose()).join('\n') + '\n';
  }
}
