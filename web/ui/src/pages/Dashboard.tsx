import { lazy, Suspense, useCallback, useEffect, useState, type FormEvent } from 'react';
import { call, ConsoleError, type BatchSummary, type Credits, type KeyListing, type SessionInfo } from '../api.ts';
import { Link } from 'wouter';
import { ErrorNote } from '../ErrorNote.tsx';
import { NoWorkspace, useWorkspace, WorkspaceBar } from '../workspace.tsx';

const fmt = new Intl.NumberFormat('en');
const day = (iso: string) => new Date(iso).toISOString().slice(0, 10);

export function Dashboard({ session, onChanged }: { session: SessionInfo; onChanged: () => Promise<void> }) {
  const [workspace, setWorkspaceId] = useWorkspace(session);
  if (!workspace) return <NoWorkspace />;
  const canManage = workspace.role !== 'member';
  return (
    <>
      <WorkspaceBar session={session} workspace={workspace} onChoose={setWorkspaceId} />
      <CreditsPanel key={`credits-${workspace.id}`} workspaceId={workspace.id} canBuy={canManage} isOwner={workspace.role === 'owner'} />
      <KeysPanel key={`keys-${workspace.id}`} workspaceId={workspace.id} canManage={canManage} />
      <BatchesPanel key={`batches-${workspace.id}`} workspaceId={workspace.id} canStart={canManage} />
      <MembersPanel key={`members-${workspace.id}`} workspaceId={workspace.id} workspaceName={workspace.name} role={workspace.role} me={session.user.id} onChanged={onChanged} />
      <SettingsPanel key={`settings-${workspace.id}`} workspace={workspace} onDeleted={onChanged} />
      <NewWorkspace
        onCreated={async (id) => {
          await onChanged();
          setWorkspaceId(id);
        }}
      />
    </>
  );
}

export function CreditsPanel({ workspaceId, canBuy, isOwner, usageLink = true }: { workspaceId: string; canBuy: boolean; isOwner: boolean; usageLink?: boolean }) {
  const [credits, setCredits] = useState<Credits | null>(null);
  const load = useCallback(async () => setCredits(await call<Credits>('GET', `/api/v1/workspaces/${workspaceId}/credits`)), [workspaceId]);
  useEffect(() => {
    void load();
    // Credits move while the page is open (analyses, purchases): refresh when it becomes visible.
    const onVisible = () => document.visibilityState === 'visible' && void load();
    document.addEventListener('visibilitychange', onVisible);
    return () => document.removeEventListener('visibilitychange', onVisible);
  }, [load]);
  if (!credits) return <section className="card" aria-busy="true">Loading credits…</section>;
  const { balance } = credits;
  return (
    <section className="card" aria-labelledby="credits-h">
      <div className="bar">
        <h2 id="credits-h">Credits</h2>
        <button type="button" className="quiet" onClick={() => void load()}>
          Refresh
        </button>
      </div>
      <dl className="balances">
        <div>
          <dt>Available</dt>
          <dd data-testid="available">{fmt.format(balance.community + balance.purchased)}</dd>
        </div>
        <div>
          <dt>Community</dt>
          <dd data-testid="community">{fmt.format(balance.community)}</dd>
        </div>
        <div>
          <dt>Purchased</dt>
          <dd data-testid="purchased">{fmt.format(balance.purchased)}</dd>
        </div>
        <div>
          <dt>Reserved by running analyses</dt>
          <dd data-testid="reserved">{fmt.format(balance.reserved)}</dd>
        </div>
      </dl>
      {isOwner && credits.card.offer && <AddCard workspaceId={workspaceId} />}
      {credits.card.onFileSince && <p className="hint">A card is on file since {new Date(credits.card.onFileSince).toLocaleDateString()}. Lenstack never charges it automatically.</p>}
      {canBuy && <BuyPacks workspaceId={workspaceId} onBought={load} />}
      {usageLink && (
      <p>
        <Link href="/usage">What each analysis, batch and purchase cost, day by day</Link> is under Usage &amp; billing.
      </p>
      )}
    </section>
  );
}

function KeysPanel({ workspaceId, canManage }: { workspaceId: string; canManage: boolean }) {
  const [keys, setKeys] = useState<KeyListing[] | null>(null);
  const [kind, setKind] = useState<'live' | 'test'>('live');
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(async () => setKeys((await call<{ keys: KeyListing[] }>('GET', `/api/v1/workspaces/${workspaceId}/keys`)).keys), [workspaceId]);
  useEffect(() => {
    void load();
  }, [load]);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const k = await call<{ key: string }>('POST', `/api/v1/workspaces/${workspaceId}/keys`, { kind, ...(name.trim() ? { name: name.trim() } : {}) });
      setIssued(k.key);
      setCopied(false);
      setName('');
      await load();
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not create the key; try again.');
    }
  };
  const revoke = async (k: KeyListing) => {
    if (!window.confirm(`Revoke ${k.prefix}…${k.last4}? Requests with it are refused within a second.`)) return;
    await call('DELETE', `/api/v1/workspaces/${workspaceId}/keys/${k.id}`);
    await load();
  };
  return (
    <section className="card" aria-labelledby="keys-h">
      <h2 id="keys-h">API keys</h2>
      {issued && (
        <div className="issued" role="status">
          <p>
            <strong>Copy your key now:</strong> it is shown only this once.
          </p>
          <code data-testid="new-key">{issued}</code>
          <button
            type="button"
            onClick={() => {
              void navigator.clipboard?.writeText(issued).then(() => setCopied(true));
            }}
          >
            {copied ? 'Copied' : 'Copy'}
          </button>
          <button type="button" className="quiet" onClick={() => setIssued(null)}>
            Done
          </button>
        </div>
      )}
      {canManage && (
        <form className="inline" onSubmit={(e) => void create(e)}>
          <label htmlFor="key-kind">Kind</label>
          <select id="key-kind" value={kind} onChange={(e) => setKind(e.target.value as 'live' | 'test')}>
            <option value="live">Live (real analyses, billed)</option>
            <option value="test">Test (sandbox fixtures, free)</option>
          </select>
          <label htmlFor="key-name">Name</label>
          <input id="key-name" placeholder="e.g. production server" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
          <button type="submit">Create key</button>
        </form>
      )}
      <ErrorNote text={error} />
      {keys === null ? (
        <p aria-busy="true">Loading keys…</p>
      ) : keys.length === 0 ? (
        <p>No keys yet.</p>
      ) : (
        <div className="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Name</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                {canManage && <th scope="col"><span className="sr-only">Actions</span></th>}
              </tr>
            </thead>
            <tbody data-testid="keys">
              {keys.map((k) => (
                <tr key={k.id}>
                  <td>
                    <code>
                      {k.prefix}…{k.last4}
                    </code>
                  </td>
                  <td>{k.name ?? ''}</td>
                  <td>{day(k.createdAt)}</td>
                  <td>{k.lastUsedAt ? new Date(k.lastUsedAt).toLocaleString() : 'never'}</td>
                  <td>{k.revokedAt ? `revoked ${day(k.revokedAt)}` : 'active'}</td>
                  {canManage && (
                    <td>
                      {!k.revokedAt && (
                        <button type="button" className="danger" onClick={() => void revoke(k)} aria-label={`Revoke ${k.prefix}…${k.last4}`}>
                          Revoke
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

interface Members {
  members: Array<{ personId: string; email: string; name: string; role: 'owner' | 'admin' | 'member'; since: string; activeKeysCreated: number }>;
  invitations: Array<{ id: string; email: string; role: string; expiresAt: string }>;
}

type Role = 'owner' | 'admin' | 'member';

function MembersPanel({ workspaceId, workspaceName, role, me, onChanged }: { workspaceId: string; workspaceName: string; role: Role; me: string; onChanged: () => Promise<void> }) {
  const [data, setData] = useState<Members | null>(null);
  const [email, setEmail] = useState('');
  const [inviteRole, setInviteRole] = useState<'member' | 'admin'>('member');
  const [message, setMessage] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [removing, setRemoving] = useState<Members['members'][number] | null>(null);
  const [keysChoice, setKeysChoice] = useState<'keep' | 'revoke'>('revoke');
  const load = useCallback(async () => setData(await call<Members>('GET', `/api/v1/workspaces/${workspaceId}/members`)), [workspaceId]);
  useEffect(() => {
    void load();
  }, [load]);
  const act = async (what: () => Promise<unknown>, done: string, fallback: string, refreshSession = false) => {
    setError(null);
    setMessage(null);
    try {
      await what();
      if (refreshSession) await onChanged();
      await load();
      setMessage(done);
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : fallback);
    }
  };
  const invite = async (e: FormEvent) => {
    e.preventDefault();
    await act(() => call('POST', `/api/v1/workspaces/${workspaceId}/invitations`, { email, role: inviteRole }), `Invitation sent to ${email}.`, 'Could not send the invitation; try again.');
    setEmail('');
  };
  const owners = data?.members.filter((m) => m.role === 'owner').length ?? 0;
  // Who may remove whom (the server decides; this only hides buttons that would be refused).
  const mayRemove = (m: Members['members'][number]) => m.personId !== me && (role === 'owner' || (role === 'admin' && m.role === 'member'));
  const remove = async (e: FormEvent) => {
    e.preventDefault();
    const m = removing!;
    await act(
      () => call('DELETE', `/api/v1/workspaces/${workspaceId}/members/${m.personId}`, { keys: keysChoice }),
      `${m.email} was removed${m.activeKeysCreated > 0 ? (keysChoice === 'revoke' ? '; the keys they created are revoked' : '; the keys they created still work') : ''}.`,
      'Could not remove them; try again.',
    );
    setRemoving(null);
  };
  const leave = async () => {
    if (!window.confirm(`Leave ${workspaceName}? You lose access at once and the API keys you created in it are revoked; an owner can invite you again.`)) return;
    setError(null);
    try {
      await call('DELETE', `/api/v1/workspaces/${workspaceId}/members/me`);
      await onChanged();
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not leave the workspace; try again.');
    }
  };
  const transfer = async (m: Members['members'][number]) => {
    if (!window.confirm(`Make ${m.email} the owner of ${workspaceName}? You become an admin.`)) return;
    await act(() => call('POST', `/api/v1/workspaces/${workspaceId}/owner`, { personId: m.personId }), `${m.email} owns ${workspaceName} now; you are an admin.`, 'Could not transfer the workspace; try again.', true);
  };
  return (
    <section className="card" aria-labelledby="members-h">
      <h2 id="members-h">Members</h2>
      {role !== 'member' && (
        <form className="inline" onSubmit={(e) => void invite(e)}>
          <label htmlFor="invite-email">Invite by e-mail</label>
          <input id="invite-email" type="email" required maxLength={254} value={email} onChange={(e) => setEmail(e.target.value)} />
          <label htmlFor="invite-role">as</label>
          <select id="invite-role" value={inviteRole} onChange={(e) => setInviteRole(e.target.value as 'member' | 'admin')}>
            <option value="member">member (sees usage)</option>
            {role === 'owner' && <option value="admin">admin (also manages keys and members)</option>}
          </select>
          <button type="submit">Send invitation</button>
        </form>
      )}
      {message && (
        <p role="status" className="notice">
          {message}
        </p>
      )}
      <ErrorNote text={error} />
      {removing && (
        <form className="removal" onSubmit={(e) => void remove(e)} aria-labelledby="removal-h">
          <h3 id="removal-h">Remove {removing.email}?</h3>
          <p className="hint">They lose access to {workspaceName} at once, in every browser they are signed in with.</p>
          {removing.activeKeysCreated > 0 ? (
            <fieldset>
              <legend>
                They created {removing.activeKeysCreated} active {removing.activeKeysCreated === 1 ? 'key' : 'keys'}
              </legend>
              <label>
                <input type="radio" name="keys" value="revoke" checked={keysChoice === 'revoke'} onChange={() => setKeysChoice('revoke')} /> Revoke them (requests with them are refused within a second)
              </label>
              <label>
                <input type="radio" name="keys" value="keep" checked={keysChoice === 'keep'} onChange={() => setKeysChoice('keep')} /> Keep them working (your servers may use them)
              </label>
            </fieldset>
          ) : (
            <p className="hint">They created no active keys.</p>
          )}
          <p className="actions">
            <button type="submit" className="danger">
              Remove {removing.email}
            </button>
            <button type="button" className="quiet" onClick={() => setRemoving(null)}>
              Cancel
            </button>
          </p>
        </form>
      )}
      {data && (
        <div className="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Person</th>
                <th scope="col">Role</th>
                <th scope="col">Since</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody data-testid="members">
              {data.members.map((m) => (
                <tr key={m.personId}>
                  <td>{m.email}</td>
                  <td>
                    {role === 'owner' && !(m.role === 'owner' && owners === 1) ? (
                      <select
                        aria-label={`Role of ${m.email}`}
                        value={m.role}
                        onChange={(e) => {
                          const next = e.target.value as Role;
                          void act(() => call('PATCH', `/api/v1/workspaces/${workspaceId}/members/${m.personId}`, { role: next }), `${m.email} is ${next === 'admin' ? 'an' : 'a'} ${next} now.`, 'Could not change the role; try again.', m.personId === me);
                        }}
                      >
                        <option value="owner">owner</option>
                        <option value="admin">admin</option>
                        <option value="member">member</option>
                      </select>
                    ) : (
                      m.role
                    )}
                  </td>
                  <td>{day(m.since)}</td>
                  <td className="rowactions">
                    {m.personId === me ? (
                      !(m.role === 'owner' && owners === 1) && (
                        <button type="button" className="quiet" onClick={() => void leave()}>
                          Leave workspace
                        </button>
                      )
                    ) : (
                      <>
                        {role === 'owner' && m.role !== 'owner' && (
                          <button type="button" className="quiet" onClick={() => void transfer(m)} aria-label={`Make owner: ${m.email}`}>
                            Make owner
                          </button>
                        )}
                        {mayRemove(m) && (
                          <button
                            type="button"
                            className="danger"
                            aria-label={`Remove ${m.email}`}
                            onClick={() => {
                              setKeysChoice('revoke');
                              setRemoving(m);
                            }}
                          >
                            Remove
                          </button>
                        )}
                      </>
                    )}
                  </td>
                </tr>
              ))}
              {data.invitations.map((i) => (
                <tr key={i.id}>
                  <td>{i.email}</td>
                  <td>{i.role} (invited)</td>
                  <td>until {day(i.expiresAt)}</td>
                  <td />
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/**
 * How long original photo bytes are kept (docs/privacy.md "Retention"), and, for an owner of a
 * team workspace, deleting it: typing its name is the confirmation.
 */
function SettingsPanel({ workspace, onDeleted }: { workspace: SessionInfo['workspaces'][number]; onDeleted: () => Promise<void> }) {
  const [days, setDays] = useState<string>('');
  const [saved, setSaved] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirm, setConfirm] = useState('');
  const owner = workspace.role === 'owner';
  useEffect(() => {
    void call<{ retentionDays: number | null }>('GET', `/api/v1/workspaces/${workspace.id}/settings`).then((s) => setDays(s.retentionDays === null ? '' : String(s.retentionDays)));
  }, [workspace.id]);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setSaved(null);
    try {
      const s = await call<{ retentionDays: number | null }>('PATCH', `/api/v1/workspaces/${workspace.id}/settings`, { retentionDays: days.trim() === '' ? null : Number(days) });
      setSaved(s.retentionDays === null ? 'Original photos are kept while your registry holds them.' : `Original photos are kept ${s.retentionDays} days after they were last sent.`);
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not save; try again.');
    }
  };
  const remove = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await call('DELETE', `/api/v1/workspaces/${workspace.id}`, { confirm });
      await onDeleted();
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not delete the workspace; try again.');
    }
  };
  return (
    <section className="card" aria-labelledby="settings-h">
      <h2 id="settings-h">Settings</h2>
      <form className="inline" onSubmit={(e) => void save(e)}>
        <label htmlFor="retention">Keep original photos (days, empty: while the registry holds them)</label>
        <input id="retention" inputMode="numeric" pattern="[0-9]*" value={days} disabled={!owner} onChange={(e) => setDays(e.target.value)} />
        {owner && <button type="submit">Save</button>}
      </form>
      <p className="hint">Lens results stay either way: lookups and cache hits keep working. Only owners change this.</p>
      {saved && <p role="status">{saved}</p>}
      {owner && workspace.kind === 'team' && (
        <form aria-label={`Delete ${workspace.name}`} onSubmit={(e) => void remove(e)}>
          <h3>Delete this workspace</h3>
          <p className="hint">
            Erases its photos, lens results, keys, members, uploads and batches at once; running work stops uncharged. Credit history is kept for
            accounting, without descriptions. This cannot be undone.
          </p>
          <label htmlFor="delete-confirm">Type {workspace.name} to confirm</label>
          <input id="delete-confirm" autoComplete="off" value={confirm} onChange={(e) => setConfirm(e.target.value)} />
          <button type="submit" className="danger" disabled={confirm !== workspace.name}>
            Delete workspace
          </button>
        </form>
      )}
      <ErrorNote text={error} />
    </section>
  );
}

function NewWorkspace({ onCreated }: { onCreated: (id: string) => Promise<void> }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const ws = await call<{ id: string }>('POST', '/api/v1/workspaces', { name });
      setName('');
      await onCreated(ws.id);
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not create the workspace; try again.');
    }
  };
  return (
    <section className="card" aria-labelledby="new-ws-h">
      <h2 id="new-ws-h">New workspace</h2>
      <p className="hint">A workspace has its own credits, keys and photo registry; invite your team to it.</p>
      <form className="inline" onSubmit={(e) => void create(e)}>
        <label htmlFor="ws-name">Workspace name</label>
        <input id="ws-name" required maxLength={80} value={name} onChange={(e) => setName(e.target.value)} />
        <button type="submit">Create workspace</button>
      </form>
      <ErrorNote text={error} />
    </section>
  );
}

export function AddCard({ workspaceId }: { workspaceId: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const returned = new URLSearchParams(window.location.search).get('card');
  const add = async () => {
    setBusy(true);
    setError(null);
    try {
      const r = await call<{ checkoutUrl?: string }>('POST', `/api/v1/workspaces/${workspaceId}/card`);
      if (r.checkoutUrl) window.location.assign(r.checkoutUrl);
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not open the card form; nothing was stored. Try again.');
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="addcard">
      <h3>Add a card, get 4,000 credits</h3>
      {returned === 'added' ? (
        <p role="status" className="notice">
          Thank you. The 4,000 credits appear here as soon as Stripe confirms the card.
        </p>
      ) : (
        <p className="hint">Once per person. The card is kept on file with Stripe and is never charged automatically: you only pay for packs you buy.</p>
      )}
      <button type="button" disabled={busy} onClick={() => void add()}>
        {busy ? 'Opening…' : 'Add a card'}
      </button>
      <ErrorNote text={error} />
    </div>
  );
}

// The uploader (and its tus client) loads when someone opens it, not with the first page.
const NewBatch = lazy(() => import('./NewBatch.tsx'));

function BatchesPanel({ workspaceId, canStart }: { workspaceId: string; canStart: boolean }) {
  const [batches, setBatches] = useState<BatchSummary[] | null>(null);
  const [opened, setOpened] = useState(false);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    let source: EventSource | null = null;
    let stopped = false;
    void call<{ batches: BatchSummary[] }>('GET', `/api/v1/workspaces/${workspaceId}/batches`).then((r) => {
      if (stopped) return;
      setBatches(r.batches);
      // Pushed while any batch runs; the server ends the stream when none does.
      if (r.batches.some((b) => b.status === 'running')) {
        source = new EventSource(`/api/v1/workspaces/${workspaceId}/batches/events`);
        source.addEventListener('batches', (e) => setBatches(JSON.parse((e as MessageEvent<string>).data) as BatchSummary[]));
        source.onerror = () => source?.close();
      }
    });
    return () => {
      stopped = true;
      source?.close();
    };
  }, [workspaceId, version]);
  if (batches === null || (batches.length === 0 && !canStart)) return null;
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
          <NewBatch workspaceId={workspaceId} onSubmitted={() => setVersion((v) => v + 1)} />
        </Suspense>
      )}
      {batches.length === 0 && !opened && canStart && <p className="hint">Hundreds or thousands of photos through the same lenses, in the background, with a spreadsheet at the end.</p>}
      <ul className="batches">
        {batches.map((b) => {
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
    </section>
  );
}

interface Packs {
  purchases: 'stripe' | 'development' | 'unavailable';
  packs: Array<{ name: string; label: string; credits: number; priceCents: number; bonusCredits: number }>;
}

const usd = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' });

export function BuyPacks({ workspaceId, onBought }: { workspaceId: string; onBought: () => Promise<void> }) {
  const [packs, setPacks] = useState<Packs | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const returned = new URLSearchParams(window.location.search).get('purchase');
  const load = useCallback(async () => setPacks(await call<Packs>('GET', `/api/v1/workspaces/${workspaceId}/packs`)), [workspaceId]);
  useEffect(() => {
    void load();
  }, [load]);
  if (!packs) return null;
  const buy = async (pack: string) => {
    setBusy(pack);
    setError(null);
    try {
      const r = await call<{ checkoutUrl?: string }>('POST', `/api/v1/workspaces/${workspaceId}/purchases`, { pack, idempotencyKey: crypto.randomUUID() });
      if (r.checkoutUrl) {
        window.location.assign(r.checkoutUrl);
        return;
      }
      await Promise.all([onBought(), load()]);
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'The purchase did not go through; nothing was charged. Try again.');
    } finally {
      setBusy(null);
    }
  };
  return (
    <div className="packs">
      <h3>Buy credits</h3>
      {returned && returned !== 'cancelled' && (
        <p role="status" className="notice">
          Thank you. The credits appear here as soon as Stripe confirms the payment.
        </p>
      )}
      {packs.purchases === 'unavailable' ? (
        <p className="hint">Purchases are not available on this server (no payment processor is configured).</p>
      ) : (
        <>
          {packs.purchases === 'development' && (
            <p className="devbanner" role="note">
              Development payments: no card is charged.
            </p>
          )}
          <ul className="packlist">
            {packs.packs.map((p) => (
              <li key={p.name}>
                <span>
                  <strong>{p.label}</strong>: {fmt.format(p.credits)} credits{p.bonusCredits > 0 && <> + {fmt.format(p.bonusCredits)} first-pack bonus</>} for {usd.format(p.priceCents / 100)}
                </span>
                <button type="button" disabled={busy !== null} onClick={() => void buy(p.name)} aria-label={`Buy the ${p.label} pack`}>
                  {busy === p.name ? 'Opening…' : 'Buy'}
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
      <ErrorNote text={error} />
    </div>
  );
}
