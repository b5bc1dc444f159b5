import { useState } from 'react';
import { Link } from 'wouter';
import { call, ConsoleError, type SessionInfo, type Workspace } from '../api.ts';
import { ErrorNote } from '../ErrorNote.tsx';

/** The page an invitation mail links to: accept as the signed-in person. */
export function AcceptInvitation({ session, onAccepted }: { session: SessionInfo | null | undefined; onAccepted: () => Promise<void> }) {
  const token = new URLSearchParams(window.location.search).get('token') ?? '';
  const here = `${window.location.pathname}${window.location.search}`;
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  if (session === undefined) return <p aria-live="polite">Loading…</p>;
  if (session === null) {
    return (
      <section className="card narrow">
        <h1>Join a workspace</h1>
        <p>Sign in, or create an account, with the address the invitation was sent to; then accept it here.</p>
        <p className="actions">
          <Link href={`/sign-in?next=${encodeURIComponent(here)}`} className="button">
            Sign in
          </Link>
          <Link href={`/sign-up?next=${encodeURIComponent(here)}`} className="button secondary">
            Create an account
          </Link>
        </p>
      </section>
    );
  }
  const accept = async () => {
    setBusy(true);
    setError(null);
    try {
      await call<{ workspace: Workspace }>('POST', '/api/v1/invitations/accept', { token });
      await onAccepted();
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Could not accept the invitation; try again.');
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="card narrow">
      <h1>Join a workspace</h1>
      <p>
        You are signed in as <strong>{session.user.email}</strong>.
      </p>
      <ErrorNote text={error} />
      <button type="button" disabled={busy} onClick={() => void accept()}>
        Accept invitation
      </button>
    </section>
  );
}
