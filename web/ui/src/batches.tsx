import { useEffect } from 'react';
import { useQueryClient } from '@tanstack/react-query';
import { Link } from 'wouter';
import type { BatchSummary } from './api.ts';
import { fmt } from './format.ts';
import { useGet, ws } from './query.ts';

/**
 * A workspace's batches, newest first, from the cache; while any runs, the server pushes the list
 * (Server-Sent Events) and the push is written into the cache, so every section showing batches
 * follows it. The server ends the stream when none runs.
 */
export function useBatches(workspaceId: string) {
  const client = useQueryClient();
  const q = useGet<{ batches: BatchSummary[] }>(ws(workspaceId, 'batches'), `/api/v1/workspaces/${workspaceId}/batches`);
  const running = q.data?.batches.some((b) => b.status === 'running') ?? false;
  useEffect(() => {
    if (!running) return;
    const source = new EventSource(`/api/v1/workspaces/${workspaceId}/batches/events`);
    source.addEventListener('batches', (e) => client.setQueryData(ws(workspaceId, 'batches'), { batches: JSON.parse((e as MessageEvent<string>).data) as BatchSummary[] }));
    // The server says when nothing runs any more; only then is the stream done with.
    source.addEventListener('end', () => source.close());
    // A dropped connection: the browser reconnects by itself, and the list is read again meanwhile so
    // that a change missed while away shows (when nothing runs any more, this effect ends the stream).
    source.onerror = () => void client.invalidateQueries({ queryKey: ws(workspaceId, 'batches') });
    return () => source.close();
  }, [client, workspaceId, running]);
  return q;
}

/** Batches with their progress, counts, credits and exports; `limit` shows the newest few. */
export function BatchList({ batches, limit }: { batches: BatchSummary[]; limit?: number }) {
  return (
    <ul className="batches">
      {batches.slice(0, limit).map((b) => {
        const finished = b.counts.done + b.counts.failed;
        const pct = Math.round((finished / b.counts.total) * 100);
        return (
          <li key={b.id} data-testid={`batch-${b.id}`}>
            <div className="bar">
              <strong>
                <Link href={`/batches/${b.id}`}>{b.id}</Link>
              </strong>
              <span>
                {b.status === 'paused' && b.pauseReason === 'credits' ? 'paused: out of credits' : b.status}
                {b.etaSeconds !== null && ` · about ${Math.max(1, Math.round(b.etaSeconds / 60))} min left`}
              </span>
            </div>
            <progress max={b.counts.total} value={finished} aria-label={`${b.id}: ${finished} of ${b.counts.total} ${b.kind === 'vehicles' ? 'vehicles' : 'photos'} finished`}>
              {pct}%
            </progress>
            <p className="hint">
              {fmt.format(b.counts.done)} done, {fmt.format(b.counts.failed)} failed, {fmt.format(b.counts.pending)} pending · {fmt.format(b.creditsCharged)} credits · export{' '}
              {(['xlsx', 'csv', 'json'] as const).map((f, i) => (
                <span key={f}>
                  {i > 0 && ', '}
                  <a href={`/api/v1/batch/${b.id}/export?format=${f}`} download>
                    {f}
                  </a>
                </span>
              ))}
            </p>
          </li>
        );
      })}
    </ul>
  );
}
