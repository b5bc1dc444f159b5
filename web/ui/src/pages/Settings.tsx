import { useEffect, useState, type FormEvent } from 'react';
import { Link, useLocation } from 'wouter';
import { call, type SessionInfo, type Workspace } from '../api.ts';
import { ActionNotes } from '../ErrorNote.tsx';
import { useGet, ws } from '../query.ts';
import { useAction } from '../useAction.ts';
import { SectionPage, useWorkspace } from '../workspace.tsx';

/**
 * Settings (/settings): the workspace's name (owners and admins rename it), how long original photos are kept (docs/privacy.md "Retention"), deleting
 * a team workspace (typing its name confirms), another workspace, and the way to one's own
 * account (sign-in methods, sessions, deleting it: /account).
 */
export function Settings({ session, onChanged }: { session: SessionInfo; onChanged: () => Promise<void> }) {
  return (
    <SectionPage session={session} section="Settings">
      {(w) => (
        <>
          <WorkspaceSettings workspace={w} onRenamed={onChanged} />
          {w.role === 'owner' && w.kind === 'team' && <DeleteWorkspace workspace={w} onDeleted={onChanged} />}
          <NewWorkspace session={session} onChanged={onChanged} />
          <section className="card" aria-labelledby="account-h">
            <h2 id="account-h">Your account</h2>
            <p>
              Your name, password, sign-in methods and sessions, and deleting your account with its personal workspace, are under{' '}
              <Link href="/account">Account</Link>.
            </p>
          </section>
        </>
      )}
    </SectionPage>
  );
}

interface WorkspaceSettingsData {
  retentionDays: number | null;
}

function WorkspaceSettings({ workspace, onRenamed }: { workspace: Workspace; onRenamed: () => Promise<void> }) {
  const owner = workspace.role === 'owner';
  const settings = useGet<WorkspaceSettingsData>(ws(workspace.id, 'settings'), `/api/v1/workspaces/${workspace.id}/settings`);
  const [days, setDays] = useState<string | null>(null);
  const action = useAction();
  // The field starts from what the server holds, and keeps what the person typed after that.
  useEffect(() => {
    if (settings.data && days === null) setDays(settings.data.retentionDays === null ? '' : String(settings.data.retentionDays));
  }, [settings.data, days]);
  const save = (e: FormEvent) => {
    e.preventDefault();
    const value = (days ?? '').trim();
    if (value !== '' && !(/^[0-9]+$/.test(value) && Number(value) >= 1 && Number(value) <= 3650)) {
      action.fail('Keep original photos between 1 and 3,650 days, or leave the field empty; nothing was saved.');
      return;
    }
    void action.run({
      run: () => call<WorkspaceSettingsData>('PATCH', `/api/v1/workspaces/${workspace.id}/settings`, { retentionDays: value === '' ? null : Number(value) }),
      fallback: 'Could not save; try again.',
      done: (s) => (s.retentionDays === null ? 'Original photos are kept while your registry holds them.' : `Original photos are kept ${s.retentionDays} days after they were last sent.`),
      invalidate: [ws(workspace.id, 'settings')],
    });
  };
  return (
    <section className="card" aria-labelledby="settings-h">
      <h2 id="settings-h">This workspace</h2>
      <dl className="facts">
        <div>
          <dt>Name</dt>
          <dd data-testid="workspace-name">{workspace.name}</dd>
        </div>
        <div>
          <dt>Kind</dt>
          <dd>{workspace.kind === 'team' ? 'Team workspace' : 'Personal workspace'}</dd>
        </div>
        <div>
          <dt>Your role</dt>
          <dd>{workspace.role}</dd>
        </div>
      </dl>
      {workspace.role !== 'member' && <RenameWorkspace key={workspace.id} workspace={workspace} onRenamed={onRenamed} />}
      <h3>Retention</h3>
      <form className="inline" aria-label="Retention" onSubmit={save}>
        <label htmlFor="retention">Keep original photos (days, empty: while the registry holds them)</label>
        <input id="retention" inputMode="numeric" aria-describedby="retention-hint" value={days ?? ''} disabled={!owner || days === null} onChange={(e) => setDays(e.target.value)} />
        {owner && (
          <button type="submit" disabled={action.busy || days === null}>
            Save
          </button>
        )}
      </form>
      <p className="hint" id="retention-hint">From 1 to 3,650 days. Lens results stay either way: lookups and cache hits keep working. Only owners change this.</p>
      <ActionNotes action={action} />
    </section>
  );
}

function RenameWorkspace({ workspace, onRenamed }: { workspace: Workspace; onRenamed: () => Promise<void> }) {
  const [name, setName] = useState(workspace.name);
  const action = useAction();
  const rename = (e: FormEvent) => {
    e.preventDefault();
    void action.run({
      run: () => call<{ workspace: { name: string } }>('PATCH', `/api/v1/workspaces/${workspace.id}`, { name }),
      fallback: 'Could not rename the workspace; try again.',
      // The session holds the names the heading, the switcher and every section show.
      after: async (r) => {
        setName(r.workspace.name);
        await onRenamed();
      },
      done: (r) => `Renamed to ${r.workspace.name}.`,
    });
  };
  return (
    <>
      <h3>Name</h3>
      <form className="inline" aria-label="Rename workspace" onSubmit={rename}>
        <label htmlFor="ws-rename">Name</label>
        <input id="ws-rename" required maxLength={80} autoComplete="off" aria-describedby="rename-hint" value={name} onChange={(e) => setName(e.target.value)} />
        <button type="submit" disabled={action.busy || name.trim() === '' || name.trim() === workspace.name}>
          Rename
        </button>
      </form>
      <p className="hint" id="rename-hint">
        Up to 80 characters, on one line. Everyone in the workspace sees the new name; owners and admins change it.
      </p>
      <ActionNotes action={action} />
    </>
  );
}

function DeleteWorkspace({ workspace, onDeleted }: { workspace: Workspace; onDeleted: () => Promise<void> }) {
  const [confirm, setConfirm] = useState('');
  const [, navigate] = useLocation();
  const action = useAction();
  const remove = (e: FormEvent) => {
    e.preventDefault();
    void action.run({
      run: () => call('DELETE', `/api/v1/workspaces/${workspace.id}`, { confirm }),
      fallback: 'Could not delete the workspace; try again.',
      after: async () => {
        await onDeleted();
        navigate('/');
      },
    });
  };
  return (
    <section className="card danger-zone" aria-labelledby="delete-h">
      <form aria-label={`Delete ${workspace.name}`} onSubmit={remove}>
        <h2 id="delete-h">Delete this workspace</h2>
        <p className="hint">
          Erases its photos, lens results, keys, members, uploads and batches at once; running work stops uncharged. Credit history is kept for accounting,
          without descriptions. This cannot be undone.
        </p>
        <label htmlFor="delete-confirm">Type {workspace.name} to confirm</label>
        <input id="delete-confirm" autoComplete="off" value={confirm} onChange={(e) => setConfirm(e.target.value)} />
        <button type="submit" className="danger" disabled={confirm !== workspace.name || action.busy}>
          Delete workspace
        </button>
      </form>
      <ActionNotes action={action} />
    </section>
  );
}

function NewWorkspace({ session, onChanged }: { session: SessionInfo; onChanged: () => Promise<void> }) {
  const [name, setName] = useState('');
  const [, choose] = useWorkspace(session);
  const [, navigate] = useLocation();
  const action = useAction();
  const create = (e: FormEvent) => {
    e.preventDefault();
    void action.run({
      run: () => call<{ id: string }>('POST', '/api/v1/workspaces', { name }),
      fallback: 'Could not create the workspace; try again.',
      // The new workspace is chosen and its overview opened.
      after: async (ws) => {
        setName('');
        await onChanged();
        choose(ws.id);
        navigate('/');
      },
    });
  };
  return (
    <section className="card" aria-labelledby="new-ws-h">
      <h2 id="new-ws-h">New workspace</h2>
      <p className="hint">A workspace has its own credits, keys and photo registry; invite your team to it.</p>
      <form className="inline" aria-label="New workspace" onSubmit={create}>
        <label htmlFor="ws-name">Workspace name</label>
        <input id="ws-name" required maxLength={80} value={name} onChange={(e) => setName(e.target.value)} />
        <button type="submit" disabled={action.busy}>
          Create workspace
        </button>
      </form>
      <ActionNotes action={action} />
    </section>
  );
}
