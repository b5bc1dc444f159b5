import { useEffect, useRef } from 'react';
import { BarChart } from 'chartist';
import { Link } from 'wouter';
import type { SessionInfo } from '../api.ts';
import { usePages, ws } from '../query.ts';
import { ErrorNote } from '../ErrorNote.tsx';
import { NoWorkspace, useWorkspace, WorkspaceBar } from '../workspace.tsx';
import { CreditsPanel } from '../credits.tsx';

interface UsageRow {
  id: string;
  at: string;
  kind: 'analysis' | 'vehicle-report' | 'enrichment' | 'batch' | 'purchase' | 'grant' | 'other';
  reference: string | null;
  items: number;
  charged: number;
  added: number;
  released: boolean;
}
interface Day {
  day: string;
  total: number;
  lenses: Record<string, number>;
}
interface UsagePage {
  rows: UsageRow[];
  next: string | null;
  perDay?: Day[];
}

const fmt = new Intl.NumberFormat('en');

function what(r: UsageRow): string {
  switch (r.kind) {
    case 'analysis':
      return r.released ? 'Analysis (failed, not charged)' : 'Analysis';
    case 'vehicle-report':
      return r.released ? 'Vehicle report (failed, not charged)' : 'Vehicle report';
    case 'enrichment':
      return 'Enrichment';
    case 'batch':
      return `Batch of ${fmt.format(r.items)}`;
    case 'purchase':
      return 'Credit pack';
    case 'grant':
      return 'Free credits';
    default:
      return 'Other';
  }
}

/**
 * Usage & billing (/usage): the balance with packs and card as on the overview, the charges per
 * day split by lens, and one row per analysis, batch or purchase, a page at a time, as CSV too.
 */
export function Usage({ session }: { session: SessionInfo }) {
  const [workspace, choose] = useWorkspace(session);
  if (!workspace) return <NoWorkspace />;
  return (
    <>
      <WorkspaceBar session={session} workspace={workspace} onChoose={choose} section="Usage & billing" />
      <CreditsPanel key={`credits-${workspace.id}`} workspaceId={workspace.id} canBuy={workspace.role !== 'member'} isOwner={workspace.role === 'owner'} usageLink={false} />
      <UsagePanel key={workspace.id} workspaceId={workspace.id} />
    </>
  );
}

function UsagePanel({ workspaceId }: { workspaceId: string }) {
  // Under ws(id, 'usage'), which a purchase invalidates; the newest page brings the per-day figures.
  const usage = usePages<UsagePage>(ws(workspaceId, 'usage', 'pages'), `/api/v1/workspaces/${workspaceId}/usage`);
  const rows = usage.data ? usage.data.pages.flatMap((p) => p.rows) : null;
  const days: Day[] = usage.data?.pages[0]?.perDay ?? [];
  const error = usage.error ? 'Could not load the usage; try again.' : null;
  return (
    <section className="card" aria-labelledby="usage-h">
      <div className="bar">
        <h2 id="usage-h">Usage</h2>
        <span className="actions">
          <button type="button" className="quiet" onClick={() => void usage.refetch()}>
            Refresh
          </button>
          <a className="button secondary" href={`/api/v1/workspaces/${workspaceId}/usage.csv`} download>
            Download CSV
          </a>
        </span>
      </div>
      <ErrorNote text={error} />
      <h3 id="chart-h">Charged per day, by lens (last 30 days)</h3>
      <LensChart days={days} />
      <h3 id="rows-h">What was charged and added</h3>
      {rows === null ? (
        <p aria-busy="true">Loading usage…</p>
      ) : rows.length === 0 ? (
        <p>Nothing charged or added yet.</p>
      ) : (
        <div className="scroll">
          <table aria-labelledby="rows-h">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">What</th>
                <th scope="col">Reference</th>
                <th scope="col" className="num">Charged</th>
                <th scope="col" className="num">Added</th>
              </tr>
            </thead>
            <tbody data-testid="usage-rows">
              {rows.map((r) => (
                <tr key={r.id}>
                  <td>{new Date(r.at).toLocaleString()}</td>
                  <td>{what(r)}</td>
                  <td>
                    {r.kind === 'batch' && r.reference ? (
                      <Link href={`/batches/${r.reference}`}>{r.reference}</Link>
                    ) : r.reference && (r.kind === 'analysis' || r.kind === 'vehicle-report' || r.kind === 'enrichment') ? (
                      <code>{r.reference}</code>
                    ) : (
                      (r.reference ?? '')
                    )}
                  </td>
                  <td className="num">{r.charged ? fmt.format(r.charged) : '0'}</td>
                  <td className="num">{r.added ? `+${fmt.format(r.added)}` : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {usage.hasNextPage && (
        <p>
          <button type="button" className="quiet" disabled={usage.isFetchingNextPage} onClick={() => void usage.fetchNextPage()}>
            Show older
          </button>
        </p>
      )}
    </section>
  );
}

/** Colours for lenses in the chart, in the order lenses first appear; `other` is always grey. */
const PALETTE = ['#0b57d0', '#d93025', '#188038', '#e37400', '#8430ce', '#007b83', '#b06000', '#c5221f', '#1967d2', '#5f6368'];

/**
 * A stacked bar per day (drawn by Chartist, an SVG chart library that only this section's chunk
 * loads), its legend, and the same figures as a table for screen readers. Each bar part carries
 * data-lens and a title, so the chart stays inspectable like the hand-drawn one it replaced.
 */
function LensChart({ days }: { days: Day[] }) {
  const lenses = [...new Set(days.flatMap((d) => Object.keys(d.lenses)))].sort((a, b) => (a === 'other' ? 1 : b === 'other' ? -1 : a.localeCompare(b)));
  const colour = (lens: string, i: number) => (lens === 'other' ? '#8c959f' : PALETTE[i % PALETTE.length]!);
  const total = days.reduce((a, d) => a + d.total, 0);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current) return;
    // One series per lens; a day without that lens is a hole (null), so no empty bar part is drawn.
    const series = lenses.map((lens) => days.map((d) => d.lenses[lens] || null));
    const chart = new BarChart(
      box.current,
      { labels: days.map((d) => d.day), series },
      {
        stackBars: true,
        width: '100%',
        height: '100%',
        low: 0,
        high: Math.max(1, ...days.map((d) => d.total)),
        chartPadding: { top: 2, right: 0, bottom: 0, left: 0 },
        axisX: { showGrid: false, showLabel: false, offset: 0 },
        axisY: { showGrid: false, showLabel: false, offset: 0 },
      },
    );
    chart.on('draw', (data) => {
      if (data.type !== 'bar') return;
      const lens = lenses[data.seriesIndex]!;
      const slot = data.chartRect.width() / Math.max(1, days.length);
      // Presentation attributes, not a style attribute: the console's CSP allows no inline styles.
      data.element.attr({ 'data-lens': lens, stroke: colour(lens, data.seriesIndex), 'stroke-width': Math.max(1, slot * 0.8) });
      data.element.elem('title').text(`${days[data.index]!.day}, ${lens}: ${fmt.format(days[data.index]!.lenses[lens] ?? 0)} credits`);
    });
    // lenses and colour follow from days, so days is the one dependency.
    return () => {
      chart.detach();
    };
  }, [days]);
  return (
    <>
      <div ref={box} className="chart" role="img" aria-labelledby="chart-h" aria-describedby="chart-total" data-testid="lens-chart" data-lenses={lenses.join(' ')} />
      <p id="chart-total" className="hint">
        {fmt.format(total)} credits charged in 30 days.
      </p>
      {lenses.length > 0 && (
        <ul className="legend" aria-label="Lenses in the chart">
          {lenses.map((lens, j) => (
            <li key={lens}>
              <svg className="swatch" viewBox="0 0 10 10" aria-hidden="true">
                <rect width="10" height="10" fill={colour(lens, j)} />
              </svg>
              {lens}: {fmt.format(days.reduce((a, d) => a + (d.lenses[lens] ?? 0), 0))}
            </li>
          ))}
        </ul>
      )}
      <details>
        <summary>The chart as a table</summary>
        <div className="scroll">
          <table data-testid="per-day">
            <thead>
              <tr>
                <th scope="col">Day</th>
                {lenses.map((l) => (
                  <th key={l} scope="col" className="num">
                    {l}
                  </th>
                ))}
                <th scope="col" className="num">
                  Total
                </th>
              </tr>
            </thead>
            <tbody>
              {days
                .filter((d) => d.total > 0)
                .map((d) => (
                  <tr key={d.day}>
                    <th scope="row">{d.day}</th>
                    {lenses.map((l) => (
                      <td key={l} className="num">
                        {fmt.format(d.lenses[l] ?? 0)}
                      </td>
                    ))}
                    <td className="num">{fmt.format(d.total)}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </div>
      </details>
    </>
  );
}
