import { useCallback, useEffect, useState } from 'react';
import { call, ConsoleError } from '../api.ts';
import { ErrorNote } from '../ErrorNote.tsx';

interface SignInMethod {
  id: string;
  kind: 'email-link' | 'password' | 'provider';
  label: string;
  since: string | null;
  removable: boolean;
}

interface AccountSession {
  id: string;
  createdAt: string;
  lastActiveAt: string;
  ipAddress: string | null;
  userAgent: string | null;
  current: boolean;
}

interface Security {
  email: string;
  methods: SignInMethod[];
  sessions: AccountSession[];
}

const when = (iso: string) => new Date(iso).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';

/** A short name for a browser from its user agent ("Chrome on Linux"); the raw string is in the title. */
function browserName(ua: string | null): string {
  if (!ua) return 'Unknown browser';
  const browser = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox' : /Chrom(e|ium)\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : ua.split(/[ /]/)[0] || 'Browser';
  const os = /Android/.test(ua) ? 'Android' : /iPhone|iPad/.test(ua) ? 'iOS' : /Windows/.test(ua) ? 'Windows' : /Mac OS X/.test(ua) ? 'macOS' : /Linux/.test(ua) ? 'Linux' : null;
  return os ? `${browser} on ${os}` : browser;
}

/** Account and security: how one signs in, where one is signed in, each removable. */
export function Account({ onSignedOut }: { onSignedOut: () => void }) {
  const [security, setSecurity] = useState<Security | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = useCallback(async () => setSecurity(await call<Security>('GET', '/api/v1/account/security')), []);
  useEffect(() => {
    load().catch((err: unknown) => setError(err instanceof ConsoleError ? err.message : 'Could not load your account; reload the page.'));
  }, [load]);
  const act = async (fn: () => Promise<void>) => {
    setError(null);
    setNotice(null);
    try {
      await fn();
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Something went wrong; try again.');
    }
  };
  if (!security) return <section className="card" aria-busy={error ? 'false' : 'true'}>{error ?? 'Loading your account…'}</section>;
  const hasPassword = security.methods.some((m) => m.kind === 'password');
  return (
    <>
      <div className="bar">
        <h1>Account and security</h1>
      </div>
      <ErrorNote text={error} />
      {notice && (
        <p role="status" className="notice">
          {notice}
        </p>
      )}
      <section className="card" aria-labelledby="methods-title">
        <h2 id="methods-title">How you sign in</h2>
        <p className="hint">Remove any way in you do not recognise: removing one signs out every other session.</p>
        <div className="scroll">
          <table data-testid="methods">
            <thead>
              <tr>
                <th scope="col">Method</th>
                <th scope="col">Added</th>
                <th scope="col">
                  <span className="sr-only">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {security.methods.map((m) => (
                <tr key={m.id}>
                  <td className="wrap">
                    {m.label}
                    {m.kind === 'email-link' && <span className="hint block">{security.email}</span>}
                  </td>
                  <td>{m.since ? when(m.since) : 'Always, for your address'}</td>
                  <td>
                    {m.removable && (
                      <button
                        type="button"
                        className="danger"
                        aria-label={`Remove ${m.label.toLowerCase()}`}
                        onClick={() =>
                          void act(async () => {
                            const r = await call<{ sessionsEnded: number }>('DELETE', `/api/v1/account/methods/${encodeURIComponent(m.id)}`);
                            await load();
                            setNotice(`${m.label} removed; ${r.sessionsEnded} other session(s) signed out.`);
                          })
                        }
                      >
                        Remove
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <p className="actions">
          <button
            type="button"
            className="secondary"
            onClick={() =>
              void act(async () => {
                await call('POST', '/api/v1/auth/request-password-reset', { email: security.email, redirectTo: '/reset-password' });
                setNotice(`We sent a link to ${security.email}: open it to ${hasPassword ? 'set a new password' : 'set a password'}.`);
              })
            }
          >
            {hasPassword ? 'Set a new password by e-mail' : 'Add a password by e-mail'}
          </button>
        </p>
      </section>
      <section className="card" aria-labelledby="sessions-title">
        <h2 id="sessions-title">Where you are signed in</h2>
        <div className="scroll">
          <table data-testid="sessions">
            <thead>
              <tr>
                <th scope="col">Browser</th>
                <th scope="col">Address</th>
                <th scope="col">Signed in</th>
                <th scope="col">Last active</th>
                <th scope="col">
                  <span className="sr-only">Action</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {security.sessions.map((s) => (
                <tr key={s.id}>
                  <td title={s.userAgent ?? undefined}>
                    {browserName(s.userAgent)}
                    {s.current && <strong> (this one)</strong>}
                  </td>
                  <td>{s.ipAddress ?? 'unknown'}</td>
                  <td>{when(s.createdAt)}</td>
                  <td>{when(s.lastActiveAt)}</td>
                  <td>
                    <button
                      type="button"
                      className="quiet"
                      aria-label={s.current ? 'Sign out this session' : `Sign out the session from ${s.ipAddress ?? 'an unknown address'} since ${when(s.createdAt)}`}
                      onClick={() =>
                        void act(async () => {
                          await call('DELETE', `/api/v1/account/sessions/${encodeURIComponent(s.id)}`);
                          if (s.current) onSignedOut();
                          else {
                            await load();
                            setNotice('That session is signed out.');
                          }
                        })
                      }
                    >
                      Sign out
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
      <DeleteAccount email={security.email} onDeleted={onSignedOut} />
    </>
  );
}

/**
 * Deleting one's account (docs/privacy.md): typing one's address confirms. Refused while one is
 * the only owner of a team workspace; the server's message names it.
 */
function DeleteAccount({ email, onDeleted }: { email: string; onDeleted: () => void }) {
  const [confirm, setConfirm] = useState('');
  const [error, setError] = useState<string | null>(null);
  const remove = async (e: React.FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await call('DELETE', '/api/v1/account', { confirm });
      onDeleted();
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not delete your account; try again.');
    }
  };
  return (
    <section className="card" aria-labelledby="delete-account-h">
      <h2 id="delete-account-h">Delete account</h2>
      <p className="hint">
        Erases your personal workspace (photos, lens results, keys, batches) and signs you out everywhere; you leave your other workspaces and the keys
        you made there are revoked. Hand over or delete team workspaces you alone own first. This cannot be undone.
      </p>
      <form aria-label="Delete account" onSubmit={(e) => void remove(e)}>
        <label htmlFor="delete-account-confirm">Type {email} to confirm</label>
        <input id="delete-account-confirm" autoComplete="off" value={confirm} onChange={(e) => setConfirm(e.target.value)} />
        <button type="submit" className="danger" disabled={confirm.trim().toLowerCase() !== email.toLowerCase()}>
          Delete my account
        </button>
      </form>
      <ErrorNote text={error} />
    </section>
  );
}
