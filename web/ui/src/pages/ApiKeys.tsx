import { useEffect, useRef, useState, type FormEvent } from 'react';
import { call, type KeyListing, type SessionInfo, type Workspace } from '../api.ts';
import { ActionNotes, ErrorNote } from '../ErrorNote.tsx';
import { day } from '../format.ts';
import { useKeys } from '../keys.ts';
import { ws } from '../query.ts';
import { useAction } from '../useAction.ts';
import { SectionPage } from '../workspace.tsx';

/**
 * API keys (/keys): create one (the secret is shown once, with a copy button), every key with its
 * prefix, name, creation and last use, and revoking one after an in-page confirmation (its safe
 * answer, "Keep it", takes the focus; Escape keeps the key too). Members see the list.
 */
export function ApiKeys({ session }: { session: SessionInfo }) {
  return <SectionPage session={session} section="API keys">{(w) => <KeysPanel workspace={w} />}</SectionPage>;
}

function KeysPanel({ workspace }: { workspace: Workspace }) {
  const canManage = workspace.role !== 'member';
  const keys = useKeys(workspace.id);
  const [kind, setKind] = useState<'live' | 'test'>('live');
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const action = useAction();
  const invalidate = [ws(workspace.id, 'keys')];
  const create = async (e: FormEvent) => {
    e.preventDefault();
    const k = await action.run({
      run: () => call<{ key: string }>('POST', `/api/v1/workspaces/${workspace.id}/keys`, { kind, ...(name.trim() ? { name: name.trim() } : {}) }),
      fallback: 'Could not create the key; try again.',
      invalidate,
    });
    if (!k) return;
    setIssued(k.key);
    setCopied(false);
    setName('');
  };
  // The key whose revocation is being confirmed.
  const [asking, setAsking] = useState<KeyListing | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const revoke = async (k: KeyListing) => {
    const done = await action.run({
      run: () => call('DELETE', `/api/v1/workspaces/${workspace.id}/keys/${k.id}`),
      fallback: 'Could not revoke the key; try again.',
      done: `${k.prefix}…${k.last4} is revoked.`,
      invalidate,
    });
    setAsking(null);
    // Its row (and its Revoke button) are gone: the keyboard starts again from the section's top.
    if (done !== undefined) heading.current?.focus();
  };
  const active = keys.data?.keys.filter((k) => !k.revokedAt) ?? [];
  const revoked = keys.data?.keys.filter((k) => k.revokedAt) ?? [];
  return (
    <section className="card" aria-labelledby="keys-h">
      <h2 id="keys-h" tabIndex={-1} ref={heading}>
        API keys
      </h2>
      <p className="hint">
        Send a key as <code>Authorization: Bearer …</code>. Live keys run real analyses and are billed; test keys answer with sandbox fixtures, free.
      </p>
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
      {canManage ? (
        <form className="inline" aria-label="Create an API key" onSubmit={(e) => void create(e)}>
          <label htmlFor="key-kind">Kind</label>
          <select id="key-kind" value={kind} onChange={(e) => setKind(e.target.value as 'live' | 'test')}>
            <option value="live">Live (real analyses, billed)</option>
            <option value="test">Test (sandbox fixtures, free)</option>
          </select>
          <label htmlFor="key-name">Name</label>
          <input id="key-name" placeholder="e.g. production server" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
          <button type="submit" disabled={action.busy}>
            Create key
          </button>
        </form>
      ) : (
        <p className="hint">Owners and admins create and revoke keys.</p>
      )}
      <ActionNotes action={action} />
      <ErrorNote text={keys.error ? 'Could not load the keys; try again.' : null} />
      {!keys.data ? (
        !keys.error && <p aria-busy="true">Loading keys…</p>
      ) : active.length === 0 ? (
        <p>No active keys.</p>
      ) : (
        <KeyTable keys={active} testId="keys" caption="Active keys" onRevoke={canManage ? (k) => setAsking(k) : undefined} busy={action.busy} />
      )}
      {asking && <ConfirmRevoke key={asking.id} k={asking} busy={action.busy} onRevoke={() => void revoke(asking)} onKeep={() => setAsking(null)} />}
      {revoked.length > 0 && (
        <details>
          <summary>Revoked keys ({revoked.length})</summary>
          <KeyTable keys={revoked} testId="revoked-keys" caption="Revoked keys" />
        </details>
      )}
    </section>
  );
}

/**
 * "Revoke svc_live_…abcd?" in the page, not the browser's confirm(): the question is the group's
 * name, "Keep it" has the focus (a stray Enter revokes nothing), Escape keeps the key, and the focus
 * goes back to the row's Revoke button when it is kept.
 */
function ConfirmRevoke({ k, busy, onRevoke, onKeep }: { k: KeyListing; busy: boolean; onRevoke: () => void; onKeep: () => void }) {
  const keep = useRef<HTMLButtonElement>(null);
  const label = `${k.prefix}…${k.last4}`;
  useEffect(() => {
    keep.current?.focus();
  }, []);
  const kept = () => {
    onKeep();
    // The Revoke button of the row this question was about.
    requestAnimationFrame(() => document.querySelector<HTMLButtonElement>(`button[data-revoke="${k.id}"]`)?.focus());
  };
  return (
    <div
      role="group"
      aria-labelledby="revoke-q"
      aria-describedby="revoke-what"
      className="confirm"
      data-testid="confirm-revoke"
      onKeyDown={(e) => {
        if (e.key === 'Escape') kept();
      }}
    >
      <p id="revoke-q">
        <strong>Revoke {label}?</strong>
      </p>
      <p id="revoke-what">
        Requests with it are refused within a second. This cannot be undone{k.name ? `; ${k.name} needs another key` : ''}.
      </p>
      <span className="actions">
        <button type="button" className="danger" disabled={busy} onClick={onRevoke}>
          Revoke key
        </button>
        <button type="button" className="quiet" ref={keep} disabled={busy} onClick={kept}>
          Keep it
        </button>
      </span>
    </div>
  );
}

function KeyTable({ keys, testId, caption, onRevoke, busy }: { keys: KeyListing[]; testId: string; caption: string; onRevoke?: ((k: KeyListing) => void) | undefined; busy?: boolean }) {
  return (
    <div className="scroll">
      <table>
        <caption className="sr-only">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Name</th>
            <th scope="col">Created</th>
            <th scope="col">Last used</th>
            <th scope="col">Status</th>
            {onRevoke && (
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody data-testid={testId}>
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
              {onRevoke && (
                <td>
                  <button type="button" className="danger" disabled={busy} onClick={() => onRevoke(k)} aria-label={`Revoke ${k.prefix}…${k.last4}`} data-revoke={k.id}>
                    Revoke
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
