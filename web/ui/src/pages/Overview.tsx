import { Link } from 'wouter';
import type { SessionInfo, Workspace } from '../api.ts';
import { BatchList, useBatches } from '../batches.tsx';
import { CreditsPanel } from '../credits.tsx';
import { ErrorNote } from '../ErrorNote.tsx';
import { fmt } from '../format.ts';
import { useGet, ws } from '../query.ts';
import { SectionPage } from '../workspace.tsx';

interface UsageSummary {
  rows: Array<{ id: string; at: string; kind: string; charged: number; added: number; released: boolean; items: number }>;
  perDay?: Array<{ day: string; total: number }>;
}
interface RecentRequests {
  requests: Array<{ id: string; at: string; operation: string; status: number; errorCode: string | null; credits: number | null; requestId: string }>;
}

/**
 * Overview (/): the workspace's balance with its packs, what it spent lately, its newest batches
 * and requests, and the next steps (a key, the playground, a batch) one link away.
 */
export function Overview({ session }: { session: SessionInfo }) {
  return (
    <SectionPage session={session}>
      {(w) => (
        <>
          <QuickLinks workspace={w} />
          <CreditsPanel workspaceId={w.id} canBuy={w.role !== 'member'} isOwner={w.role === 'owner'} />
          <div className="overview-grid">
            <RecentUsage workspaceId={w.id} />
            <RecentRequests workspaceId={w.id} />
          </div>
          <RecentBatches workspaceId={w.id} />
        </>
      )}
    </SectionPage>
  );
}

function QuickLinks({ workspace }: { workspace: Workspace }) {
  const canManage = workspace.role !== 'member';
  return (
    <nav aria-label="Get started" className="quick">
      <Link href="/keys" className="button">
        {canManage ? 'Create an API key' : 'API keys'}
      </Link>
      <Link href="/playground" className="button secondary">
        Try the playground
      </Link>
      {canManage && (
        <Link href="/batches" className="button secondary">
          Start a batch
        </Link>
      )}
    </nav>
  );
}

function RecentUsage({ workspaceId }: { workspaceId: string }) {
  const usage = useGet<UsageSummary>(ws(workspaceId, 'usage', 'recent'), `/api/v1/workspaces/${workspaceId}/usage?limit=5`);
  const days = usage.data?.perDay ?? [];
  const last7 = days.slice(-7).reduce((a, d) => a + d.total, 0);
  const last30 = days.reduce((a, d) => a + d.total, 0);
  return (
    <section className="card" aria-labelledby="recent-usage-h">
      <h2 id="recent-usage-h">Recent usage</h2>
      {usage.error ? (
        <ErrorNote text="Could not load the usage; try again." />
      ) : !usage.data ? (
        <p aria-busy="true">Loading usage…</p>
      ) : (
        <>
          <dl className="facts">
            <div>
              <dt>Charged, last 7 days</dt>
              <dd data-testid="charged-7d">{fmt.format(last7)} credits</dd>
            </div>
            <div>
              <dt>Charged, last 30 days</dt>
              <dd data-testid="charged-30d">{fmt.format(last30)} credits</dd>
            </div>
          </dl>
          {usage.data.rows.length === 0 ? (
            <p className="hint">Nothing charged yet.</p>
          ) : (
            <ul className="recent" aria-label="Latest charges and credits">
              {usage.data.rows.map((r) => (
                <li key={r.id}>
                  <span>{new Date(r.at).toLocaleString()}</span> <span>{label(r)}</span>{' '}
                  <strong className="num">{r.added ? `+${fmt.format(r.added)}` : `−${fmt.format(r.charged)}`}</strong>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
      <p>
        <Link href="/usage">All usage and billing</Link>
      </p>
    </section>
  );
}

function label(r: UsageSummary['rows'][number]): string {
  switch (r.kind) {
    case 'analysis':
      return r.released ? 'Analysis (failed, not charged)' : 'Analysis';
    case 'vehicle-report':
      return 'Vehicle report';
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

function RecentRequests({ workspaceId }: { workspaceId: string }) {
  const requests = useGet<RecentRequests>(ws(workspaceId, 'requests', 'recent'), `/api/v1/workspaces/${workspaceId}/requests?limit=5`);
  return (
    <section className="card" aria-labelledby="recent-requests-h">
      <h2 id="recent-requests-h">Recent requests</h2>
      {requests.error ? (
        <ErrorNote text="Could not load the requests; try again." />
      ) : !requests.data ? (
        <p aria-busy="true">Loading requests…</p>
      ) : requests.data.requests.length === 0 ? (
        <p className="hint">No API requests in the last 30 days. Create a key and send one, or try the playground.</p>
      ) : (
        <ul className="recent" aria-label="Latest API requests" data-testid="recent-requests">
          {requests.data.requests.map((r) => (
            <li key={r.id}>
              <Link href={`/requests/${r.id}`} aria-label={`Request ${r.requestId}: ${r.operation}, ${r.status}`}>
                {r.operation}
              </Link>{' '}
              <span className={r.status >= 400 ? 'status-error' : undefined}>
                {r.status}
                {r.errorCode ? ` ${r.errorCode}` : ''}
              </span>{' '}
              <span className="hint">{new Date(r.at).toLocaleString()}</span>
            </li>
          ))}
        </ul>
      )}
      <p>
        <Link href="/requests">All requests</Link>
      </p>
    </section>
  );
}

function RecentBatches({ workspaceId }: { workspaceId: string }) {
  const batches = useBatches(workspaceId);
  if (!batches.data || batches.data.batches.length === 0) return null;
  return (
    <section className="card" aria-labelledby="recent-batches-h">
      <h2 id="recent-batches-h">Recent batches</h2>
      <BatchList batches={batches.data.batches} limit={5} />
      <p>
        <Link href="/batches">All batches</Link>
      </p>
    </section>
  );
}
