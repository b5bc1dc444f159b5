/**
 * Reading a Prometheus text exposition in tests. A series is written as it appears in a scrape,
 * `name{a="x",b="y"}`; label order does not matter (prom-client writes `le` first and the
 * others in the order the call site gave them).
 */

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const SERIES = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The name and sorted label pairs of a series, as one comparable string. */
function seriesKey(series: string): string {
  const m = SERIES.exec(series.trim());
  if (!m) throw new Error(`not a series: ${series}`);
  const pairs = [...(m[2] ?? '').matchAll(LABEL)].map((l) => `${l[1]}="${l[2]}"`).sort();
  return `${m[1]}{${pairs.join(',')}}`;
}

/** One sample's value from an exposition, or undefined when the series is absent. */
export function sample(text: string, series: string): number | undefined {
  const want = seriesKey(series);
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    if (seriesKey(line.slice(0, cut)) === want) return Number(line.slice(cut + 1));
  }
  return undefined;
}
