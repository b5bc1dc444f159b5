import { keepPreviousData } from '@tanstack/react-query';
import { useEffect, useMemo, useState, type FormEvent } from 'react';
import { Link, useLocation, useSearch } from 'wouter';
import { call, ConsoleError, type SessionInfo } from '../api.ts';
import { useKeys } from '../keys.ts';
import { ErrorNote } from '../ErrorNote.tsx';
import { useGet, ws } from '../query.ts';
import { NoWorkspace, useWorkspace, WorkspaceBar } from '../workspace.tsx';

interface RequestRow {
  id: string;
  at: string;
  key: { id: string; label: string; name: string | null };
  operation: string;
  status: number;
  errorCode: string | null;
  credits: number | null;
  latencyMs: number;
  requestId: string;
  analysisId: string | null;
}
interface RequestPage {
  requests: RequestRow[];
  next: string | null;
  operations?: string[];
}
interface Filter {
  status: string;
  key: string;
  operation: string;
  from: string;
  to: string;
}
const fmt = new Intl.NumberFormat('en');

/** The list's query string: the filter (days as UTC midnights, `to` inclusive) and the page. */
function query(filter: Filter, cursor: string | null): string {
  const q = new URLSearchParams();
  if (filter.status) q.set('status', filter.status);
  if (filter.key) q.set('key', filter.key);
  if (filter.operation) q.set('operation', filter.operation);
  if (filter.from) q.set('from', `${filter.from}T00:00:00Z`);
  if (filter.to) q.set('to', new Date(Date.parse(`${filter.to}T00:00:00Z`) + 86_400_000).toISOString());
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * Requests (/requests): every API request the workspace's keys made in the last 30 days, newest
 * first, filtered by status, key, operation and days (kept in the address), a page at a time (keyset: "Older" follows
 * the cursor the server gave, "Newer" goes back through the ones already seen).
 */
export function Requests({ session }: { session: SessionInfo }) {
  const [workspace, choose] = useWorkspace(session);
  const search = useSearch();
  if (!workspace) return <NoWorkspace />;
  return (
    <>
      <WorkspaceBar session={session} workspace={workspace} onChoose={choose} section="Requests" />
      <RequestList key={`${workspace.id}?${search}`} workspaceId={workspace.id} search={search} />
    </>
  );
}

/** The filter as the address holds it (/requests?status=error&key=…), so a filtered view can be linked and reloaded. */
function filterFrom(search: string): Filter {
  const q = new URLSearchParams(search);
  return { status: q.get('status') ?? '', key: q.get('key') ?? '', operation: q.get('operation') ?? '', from: q.get('from') ?? '', to: q.get('to') ?? '' };
}

/** One workspace's list under one filter: a new filter (a new address) mounts a new list, at its newest page. */
function RequestList({ workspaceId, search }: { workspaceId: string; search: string }) {
  const [, navigate] = useLocation();
  const filter = useMemo(() => filterFrom(search), [search]);
  const [draft, setDraft] = useState<Filter>(filter);
  // The cursors of the pages before this one (keyset pagination has no page numbers).
  const [trail, setTrail] = useState<Array<string | null>>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  // Each page is a cache entry; the page shown stays while the next one loads ("Older", "Newer").
  const list = useGet<RequestPage>(ws(workspaceId, 'requests', 'list', search, cursor ?? ''), `/api/v1/workspaces/${workspaceId}/requests${query(filter, cursor)}`, {
    placeholderData: keepPreviousData,
  });
  const page = list.data ?? null;
  // The operations the server names come with a page; the last ones given stay in the filter.
  const [operations, setOperations] = useState<string[]>([]);
  useEffect(() => {
    if (list.data?.operations) setOperations(list.data.operations);
  }, [list.data]);
  const keys = useKeys(workspaceId).data?.keys ?? [];
  const error = list.error ? (list.error instanceof ConsoleError ? list.error.message : 'Could not load the requests; try again.') : null;
  const apply = (e: FormEvent) => {
    e.preventDefault();
    const q = new URLSearchParams(Object.entries(draft).filter(([, v]) => v !== ''));
    navigate(q.size ? `/requests?${q}` : '/requests');
  };
  const set = (k: keyof Filter) => (e: { target: { value: string } }) => setDraft((d) => ({ ...d, [k]: e.target.value }));
  return (
    <section className="card" aria-labelledby="requests-h">
      <div className="bar">
        <h2 id="requests-h">API requests, last 30 days</h2>
        <button type="button" className="quiet" onClick={() => void list.refetch()}>
          Refresh
        </button>
      </div>
      <form className="filters" aria-label="Filter requests" onSubmit={apply}>
        <label>
          Status
          <select value={draft.status} onChange={set('status')}>
            <option value="">All</option>
            <option value="ok">Succeeded</option>
            <option value="error">Failed</option>
            {[400, 401, 402, 404, 409, 413, 422, 429, 500, 502, 503].map((s) => (
              <option key={s} value={String(s)}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Key
          <select value={draft.key} onChange={set('key')}>
            <option value="">All keys</option>
            {keys.map((k) => (
              <option key={k.id} value={k.id}>
                {k.prefix}…{k.last4}
                {k.name ? ` (${k.name})` : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          Operation
          <select value={draft.operation} onChange={set('operation')}>
            <option value="">All operations</option>
            {operations.map((o) => (
              <option key={o} value={o}>
                {o}
              </option>
            ))}
          </select>
        </label>
        <label>
          From (UTC day)
          <input type="date" value={draft.from} onChange={set('from')} />
        </label>
        <label>
          To (UTC day)
          <input type="date" value={draft.to} onChange={set('to')} />
        </label>
        <button type="submit">Apply</button>
      </form>
      <ErrorNote text={error} />
      {page === null ? (
        <p aria-busy="true">Loading requests…</p>
      ) : page.requests.length === 0 ? (
        <p>No requests {Object.values(filter).every((v) => v === '') ? 'in the last 30 days' : 'match this filter'}.</p>
      ) : (
        <div className="scroll">
          <table aria-labelledby="requests-h">
            <thead>
              <tr>
                <th scope="col">Time (opens the request)</th>
                <th scope="col" className="num">Status</th>
                <th scope="col">Error code</th>
                <th scope="col">Operation</th>
                <th scope="col">Key</th>
                <th scope="col" className="num">Credits</th>
                <th scope="col" className="num">Latency</th>
                <th scope="col">Request id</th>
              </tr>
            </thead>
            <tbody data-testid="requests">
              {page.requests.map((r) => (
                <tr key={r.id}>
                  <td>
                    <Link href={`/requests/${r.id}`}>
                      {new Date(r.at).toLocaleString()}
                      <span className="sr-only">: open request {r.requestId}</span>
                    </Link>
                  </td>
                  <td className={`num${r.status >= 400 ? ' status-error' : ''}`}>{r.status}</td>
                  <td>{r.errorCode ?? ''}</td>
                  <td>{r.operation}</td>
                  <td>
                    <code>{r.key.label}</code>
                    {r.key.name ? ` ${r.key.name}` : ''}
                  </td>
                  <td className="num">{r.credits === null ? '' : fmt.format(r.credits)}</td>
                  <td className="num">{fmt.format(r.latencyMs)} ms</td>
                  <td>
                    <code>{r.requestId}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p className="actions">
        {trail.length > 0 && (
          <button
            type="button"
            className="quiet"
            onClick={() => {
              setCursor(trail.at(-1) ?? null);
              setTrail((t) => t.slice(0, -1));
            }}
          >
            Newer
          </button>
        )}
        {page?.next && (
          <button
            type="button"
            className="quiet"
            onClick={() => {
              setTrail((t) => [...t, cursor]);
              setCursor(page.next);
            }}
          >
            Older
          </button>
        )}
      </p>
    </section>
  );
}

interface RequestDetail extends RequestRow {
  error: unknown;
  analysis: unknown;
}

/** One request (/requests/{id}): what it was, and the error envelope or the stored analysis it answered with. */
export function RequestPage({ session, id }: { session: SessionInfo; id: string }) {
  const [workspace, choose] = useWorkspace(session);
  const read = useGet<RequestDetail>(ws(workspace?.id ?? '', 'requests', 'one', id), `/api/v1/workspaces/${workspace?.id ?? ''}/requests/${encodeURIComponent(id)}`, {
    enabled: workspace !== undefined,
  });
  const detail = read.data ?? null;
  const failed = read.error;
  const error = failed
    ? failed instanceof ConsoleError && failed.status === 404
      ? 'No such request in this workspace (requests are kept 30 days).'
      : 'Could not load the request; try again.'
    : null;
  if (!workspace) return <NoWorkspace />;
  return (
    <>
      <WorkspaceBar session={session} workspace={workspace} onChoose={choose} section="Requests" />
      <section className="card detail" aria-labelledby="request-h">
        <p>
          <Link href="/requests">← All requests</Link>
        </p>
        <h2 id="request-h">{detail ? `Request ${detail.requestId}` : 'Request'}</h2>
        <ErrorNote text={error} />
        {!detail && !error && <p aria-busy="true">Loading…</p>}
        {detail && (
          <>
            <dl>
              <dt>Time</dt>
              <dd>{new Date(detail.at).toLocaleString()}</dd>
              <dt>Key</dt>
              <dd>
                <code>{detail.key.label}</code>
                {detail.key.name ? ` ${detail.key.name}` : ''}
              </dd>
              <dt>Operation</dt>
              <dd>{detail.operation}</dd>
              <dt>Status</dt>
              <dd data-testid="request-status">{detail.status}</dd>
              {detail.errorCode && (
                <>
                  <dt>Error code</dt>
                  <dd data-testid="request-code">{detail.errorCode}</dd>
                </>
              )}
              <dt>Credits</dt>
              <dd>{detail.credits === null ? '—' : fmt.format(detail.credits)}</dd>
              <dt>Latency</dt>
              <dd>{fmt.format(detail.latencyMs)} ms</dd>
            </dl>
            {detail.error ? (
              <>
                <h3>The error it was answered with</h3>
                <pre data-testid="request-error">{JSON.stringify(detail.error, null, 2)}</pre>
              </>
            ) : detail.analysis ? (
              <>
                <h3>The analysis it was answered with</h3>
                <pre data-testid="request-analysis">{JSON.stringify(detail.analysis, null, 2)}</pre>
              </>
            ) : (
              <p className="hint">This request's answer is not stored (only analyses and errors are).</p>
            )}
          </>
        )}
      </section>
    </>
  );
}
