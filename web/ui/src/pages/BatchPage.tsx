import { useCallback, useEffect, useState } from 'react';
import { Link } from 'wouter';
import { call, ConsoleError, type BatchSummary } from '../api.ts';

interface Report {
  reportId?: string;
  overallCondition?: { grade: string; score: number; confidence: number; summary: string };
  componentGrades?: Array<{ component: string; grade: string; notes: string | null }>;
  observations?: Array<{ component: string; type: string; severity: string | number; description: string; photoIndexes: number[] }>;
  accidentIndicators?: { likelihood: number };
  missingViews?: string[];
  vehicleContext?: { vin: string | null; mileage: number | null; make: string | null; model: string | null; year: number | null };
}

interface BatchItem {
  index: number;
  source: string;
  sha256: string | null;
  status: 'pending' | 'done' | 'failed';
  error: { code: string; message: string } | null;
  creditsCharged: number;
  lenses: Record<string, unknown> | null;
  report: Report | null;
  photos: Array<{ source: string; sha256: string | null }> | null;
}

interface BatchPageData {
  workspaceId: string;
  mayRetry: boolean;
  batch: BatchSummary & { lenses: string[] };
  /** The batch's first failed items, wherever they are (first page only). */
  failed: BatchItem[];
  items: BatchItem[];
  nextAfter: number | null;
}

const fmt = new Intl.NumberFormat('en');
const pct = (n: number) => `${Math.round(n * 100)} %`;
const PAGE = 200;

/** A few of a lens's answers as a person reads them: its first plain values, a level or two deep. */
function summarize(value: unknown, max = 5): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (v: unknown, key: string, depth: number) => {
    if (out.length >= max || v === null || v === undefined) return;
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') {
      out.push([key, String(v).slice(0, 200)]);
    } else if (Array.isArray(v)) {
      const plain = v.filter((x) => typeof x === 'string' || typeof x === 'number');
      if (plain.length) out.push([key, plain.slice(0, 6).join(', ')]);
    } else if (typeof v === 'object' && depth < 2) {
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) walk(x, key ? `${key} › ${k}` : k, depth + 1);
    }
  };
  walk(value, '', 0);
  return out;
}

/**
 * One batch at its own address (/batches/:id): progress that follows the batch while it runs
 * (polled until it ends), each vehicle's report or each photo's lens answers with their
 * thumbnails, failed ones first with their reason and a retry, and the exports.
 */
export function BatchPage({ id }: { id: string }) {
  const [data, setData] = useState<BatchPageData | null>(null);
  const [more, setMore] = useState<BatchItem[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [tick, setTick] = useState(0);

  const load = useCallback(async () => {
    try {
      setData(await call<BatchPageData>('GET', `/api/v1/batch/${encodeURIComponent(id)}?limit=${PAGE}`));
      setProblem(null);
    } catch (err) {
      setProblem(err instanceof ConsoleError ? err.message : 'The batch could not be loaded');
    }
  }, [id]);
  useEffect(() => {
    void load();
  }, [load, tick]);
  // Followed until the batch ends: every two seconds while it runs, every ten while it is paused
  // (a purchase or a resume elsewhere starts it again). Not by its pending count: the last item
  // finishes a moment before the workflow marks the batch completed, and a page that stopped at
  // "0 pending" would show "running" for ever.
  const followEvery = data === null ? null : data.batch.status === 'running' ? 2000 : data.batch.status === 'paused' ? 10_000 : null;
  useEffect(() => {
    if (followEvery === null) return;
    const t = setTimeout(() => setTick((n) => n + 1), followEvery);
    return () => clearTimeout(t);
  }, [followEvery, data]);

  if (problem && !data) return <p role="alert" className="error">{problem}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const { batch, workspaceId } = data;
  const items = [...data.items, ...more];
  const finished = batch.counts.done + batch.counts.failed;
  const thumb = (sha256: string | null) => (sha256 ? `/api/v1/workspaces/${workspaceId}/thumbnails/${sha256}` : null);
  const unit = batch.kind === 'vehicles' ? 'vehicles' : 'photos';

  const retry = async (index: number, source: string) => {
    try {
      await call('POST', `/api/v1/batch/${encodeURIComponent(id)}/items/${index}/retry`, {});
      setNotice(`${source} runs again.`);
      setMore([]);
      setTick((n) => n + 1);
    } catch (err) {
      setNotice(err instanceof ConsoleError ? err.message : 'The retry could not be started');
    }
  };
  const loadMore = async () => {
    const after = items[items.length - 1]?.index ?? -1;
    const r = await call<BatchPageData>('GET', `/api/v1/batch/${encodeURIComponent(id)}?after=${after}&limit=${PAGE}`);
    setMore((m) => [...m, ...r.items]);
  };
  // Failed ones first (what needs the person): the batch's first failures, whichever page they are
  // on, and any other of the pages loaded; then the rest in the batch's order.
  const failedFirst = new Map([...data.failed, ...items.filter((i) => i.status === 'failed')].map((i) => [i.index, i]));
  const ordered = [...[...failedFirst.values()].sort((a, b) => a.index - b.index), ...items.filter((i) => !failedFirst.has(i.index))];

  return (
    <div className="batch-page">
      <p>
        <Link href="/batches">← Batches</Link>
      </p>
      <section className="card" aria-labelledby="batch-h">
        <h1 id="batch-h">Batch {batch.id}</h1>
        <p data-testid="batch-status" aria-live="polite">
          {batch.status === 'paused' && batch.pauseReason === 'credits' ? 'paused: out of credits' : batch.status} · {fmt.format(batch.counts.done)} done, {fmt.format(batch.counts.failed)} failed,{' '}
          {fmt.format(batch.counts.pending)} pending of {fmt.format(batch.counts.total)} {unit} · {fmt.format(batch.creditsCharged)} credits
          {batch.etaSeconds !== null && ` · about ${Math.max(1, Math.round(batch.etaSeconds / 60))} min left`}
        </p>
        <progress max={batch.counts.total} value={finished} aria-label={`${finished} of ${batch.counts.total} ${unit} finished`}>
          {Math.round((finished / Math.max(1, batch.counts.total)) * 100)}%
        </progress>
        <p>
          Export:{' '}
          {(['xlsx', 'csv', 'json'] as const).map((f, i) => (
            <span key={f}>
              {i > 0 && ', '}
              <a href={`/api/v1/batch/${batch.id}/export?format=${f}`} download>
                {f}
              </a>
            </span>
          ))}
        </p>
        {notice && <p role="status">{notice}</p>}
      </section>
      {batch.kind === 'vehicles' ? (
        <ol className="vehicles" aria-label="Vehicles">
          {ordered.map((it) => (
            <li key={it.index} className="card" data-testid={`vehicle-${it.index}`}>
              <VehicleReport item={it} thumb={thumb} onRetry={data.mayRetry ? () => void retry(it.index, it.source) : null} />
            </li>
          ))}
        </ol>
      ) : (
        <ol className="photo-grid" aria-label="Photos">
          {ordered.map((it) => (
            <li key={it.index} className={`photo-card ${it.status}`} data-testid={`photo-${it.index}`}>
              {thumb(it.sha256) ? <img src={thumb(it.sha256)!} alt={`Photo ${it.index + 1}: ${it.source}`} width={256} height={256} loading="lazy" /> : <div className="no-thumb" aria-hidden="true" />}
              <h2 className="name">{it.source}</h2>
              <p className={`state ${it.status}`}>{it.status}</p>
              {it.error && (
                <>
                  <p className="error">
                    {it.error.code}: {it.error.message}
                  </p>
                  {data.mayRetry && (
                    <button type="button" className="secondary" onClick={() => void retry(it.index, it.source)}>
                      Retry {it.source}
                    </button>
                  )}
                </>
              )}
              {it.lenses &&
                Object.entries(it.lenses).map(([lens, output]) => (
                  <details key={lens}>
                    <summary>{lens}</summary>
                    <dl>
                      {summarize(output).map(([k, v]) => (
                        <div key={k}>
                          <dt>{k}</dt>
                          <dd>{v}</dd>
                        </div>
                      ))}
                    </dl>
                  </details>
                ))}
            </li>
          ))}
        </ol>
      )}
      {items.length < batch.counts.total && (data.nextAfter !== null || more.length > 0) && (
        <p>
          <button type="button" className="secondary" onClick={() => void loadMore()}>
            Show more {unit}
          </button>
        </p>
      )}
    </div>
  );
}

function VehicleReport({ item, thumb, onRetry }: { item: BatchItem; thumb: (sha256: string | null) => string | null; onRetry: (() => void) | null }) {
  const photos = item.photos ?? [];
  const r = item.report;
  const photoImg = (i: number, label: string) => {
    const src = thumb(photos[i]?.sha256 ?? null);
    return src ? <img key={`${label}-${i}`} src={src} alt={`${label}: photo ${i + 1}, ${photos[i]?.source ?? ''}`} width={128} height={128} loading="lazy" /> : null;
  };
  return (
    <article aria-labelledby={`v-${item.index}`}>
      <div className="bar">
        <h2 id={`v-${item.index}`}>{item.source}</h2>
        <span className={`state ${item.status}`}>{item.status === 'pending' ? 'waiting' : item.status}</span>
      </div>
      {item.error && (
        <>
          <p className="error">
            {item.error.code}: {item.error.message}
          </p>
          {onRetry && (
            <button type="button" className="secondary" onClick={onRetry}>
              Retry {item.source}
            </button>
          )}
        </>
      )}
      {r?.overallCondition && (
        <>
          <p data-testid="overall">
            <strong>Overall condition: {r.overallCondition.grade}</strong> ({pct(r.overallCondition.score)}, confidence {pct(r.overallCondition.confidence)}). {r.overallCondition.summary}
          </p>
          {r.vehicleContext && (
            <p className="hint">
              {[r.vehicleContext.year, r.vehicleContext.make, r.vehicleContext.model].filter(Boolean).join(' ')}
              {r.vehicleContext.vin && ` · VIN ${r.vehicleContext.vin}`}
              {r.vehicleContext.mileage !== null && ` · ${fmt.format(r.vehicleContext.mileage)} on the clock`}
              {r.accidentIndicators && ` · accident likelihood ${pct(r.accidentIndicators.likelihood)}`}
            </p>
          )}
          {r.componentGrades && r.componentGrades.length > 0 && (
            <div className="table-wrap">
              <table>
                <caption>Components</caption>
                <thead>
                  <tr>
                    <th scope="col">Component</th>
                    <th scope="col">Grade</th>
                    <th scope="col">Notes</th>
                  </tr>
                </thead>
                <tbody>
                  {r.componentGrades.map((g) => (
                    <tr key={g.component}>
                      <th scope="row">{g.component}</th>
                      <td>{g.grade}</td>
                      <td>{g.notes ?? ''}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <h3>Damage</h3>
          {r.observations && r.observations.length > 0 ? (
            <ul className="damage" data-testid="damage">
              {r.observations.map((o, k) => (
                <li key={k}>
                  <p>
                    <strong>
                      {o.component}: {o.type}
                    </strong>{' '}
                    (severity {String(o.severity)}) — {o.description}
                  </p>
                  <p className="thumbs">{o.photoIndexes.map((i) => photoImg(i, `${o.component} ${o.type}`))}</p>
                </li>
              ))}
            </ul>
          ) : (
            <p>None seen.</p>
          )}
          {r.missingViews && r.missingViews.length > 0 && <p className="hint">Views missing: {r.missingViews.join(', ')}</p>}
        </>
      )}
      {photos.length > 0 && (
        <details>
          <summary>{fmt.format(photos.length)} photos</summary>
          <p className="thumbs">{photos.map((_, i) => photoImg(i, item.source))}</p>
        </details>
      )}
    </article>
  );
}
