import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const DASHBOARDS_DIR = fileURLToPath(new URL('../../deploy/grafana/dashboards/', import.meta.url));

export interface DashboardPanel {
  title: string;
  datasourceUid: string | undefined;
  exprs: string[];
}
export interface Dashboard {
  file: string;
  uid: string;
  title: string;
  panels: DashboardPanel[];
}

interface RawTarget {
  expr?: string;
  datasource?: { uid?: string };
}
interface RawPanel {
  title: string;
  datasource?: { uid?: string };
  targets?: RawTarget[];
  panels?: RawPanel[];
}

/** Every dashboard JSON committed under deploy/grafana/dashboards, with each panel's PromQL. */
export function loadDashboards(): Dashboard[] {
  return readdirSync(DASHBOARDS_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => {
      const raw = JSON.parse(readFileSync(DASHBOARDS_DIR + file, 'utf8')) as { uid: string; title: string; panels: RawPanel[] };
      // Rows may nest panels.
      const flat = (ps: RawPanel[]): RawPanel[] => ps.flatMap((p) => [p, ...flat(p.panels ?? [])]);
      return {
        file,
        uid: raw.uid,
        title: raw.title,
        panels: flat(raw.panels)
          .filter((p) => p.targets)
          .map((p) => ({ title: p.title, datasourceUid: p.datasource?.uid, exprs: (p.targets ?? []).map((t) => t.expr ?? '') })),
      };
    });
}

const PROMQL_KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'and', 'or', 'unless', 'inf', 'nan']);

/**
 * The metric names a PromQL expression reads: identifiers that are not functions or
 * aggregations (followed by "("), keywords, label names (inside {…}, by (…), without (…)),
 * durations or strings.
 */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/(?<![a-zA-Z0-9_:])\d[\d.e+-]*(?:ms|[smhdwy])?(?![a-zA-Z0-9_:])/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = stripped.slice(m.index + m[0].length);
    if (/^\s*\(/.test(after)) continue;
    if (PROMQL_KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}
