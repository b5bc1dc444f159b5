import { lazy, Suspense, useState } from 'react';
import { useQueryClient } from '@tanstack/react-query';
import type { SessionInfo, Workspace } from '../api.ts';
import { BatchList, useBatches } from '../batches.tsx';
import { ErrorNote } from '../ErrorNote.tsx';
import { ws } from '../query.ts';
import { SectionPage } from '../workspace.tsx';

// The uploader (and its tus client) loads when someone opens it, not with the section.
const NewBatch = lazy(() => import('./NewBatch.tsx'));

/** Batches (/batches): every batch of the workspace, followed live while any runs, and a new one (owners and admins). */
export function Batches({ session }: { session: SessionInfo }) {
  return <SectionPage session={session} section="Batches">{(w) => <BatchesPanel workspace={w} />}</SectionPage>;
}

function BatchesPanel({ workspace }: { workspace: Workspace }) {
  const canStart = workspace.role !== 'member';
  const batches = useBatches(workspace.id);
  const client = useQueryClient();
  const [opened, setOpened] = useState(false);
  return (
    <section className="card" aria-labelledby="batches-h">
      <div className="bar">
        <h2 id="batches-h">Batches</h2>
        {canStart && !opened && (
          <button type="button" className="secondary" onClick={() => setOpened(true)}>
            New batch
          </button>
        )}
      </div>
      {opened && (
        <Suspense fallback={<p aria-busy="true">Loading…</p>}>
          <NewBatch workspaceId={workspace.id} onSubmitted={() => void client.invalidateQueries({ queryKey: ws(workspace.id, 'batches') })} />
        </Suspense>
      )}
      <ErrorNote text={batches.error ? 'Could not load the batches; try again.' : null} />
      {!batches.data ? (
        !batches.error && <p aria-busy="true">Loading batches…</p>
      ) : batches.data.batches.length === 0 ? (
        !opened && (
          <p className="hint">
            {canStart
              ? 'Hundreds or thousands of photos through the same lenses, in the background, with a spreadsheet at the end.'
              : 'No batches yet. Owners and admins start them.'}
          </p>
        )
      ) : (
        <BatchList batches={batches.data.batches} />
      )}
    </section>
  );
}
