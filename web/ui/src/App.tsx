import { lazy, Suspense, useCallback, useEffect, useState } from 'react';
import { Link, Route, Switch, useLocation } from 'wouter';
import { call, ConsoleError, type SessionInfo } from './api.ts';
import { SignIn, SignUp, CheckMail, ResetPassword } from './pages/Auth.tsx';
import { Account } from './pages/Account.tsx';
import { Dashboard } from './pages/Dashboard.tsx';
import { DevMailbox } from './pages/DevMailbox.tsx';
import { AcceptInvitation } from './pages/Invitation.tsx';
// A batch's page (reports, thumbnails) loads with its first visit, not with every console page.
const BatchPage = lazy(() => import('./pages/BatchPage.tsx').then((m) => ({ default: m.BatchPage })));

/** Where to go after signing in: a same-site path from ?next=, else home. */
export function nextPath(): string {
  const next = new URLSearchParams(window.location.search).get('next');
  return next && next.startsWith('/') && !next.startsWith('//') ? next : '/';
}

export function App() {
  const [session, setSession] = useState<SessionInfo | null | undefined>(undefined);
  const [, navigate] = useLocation();
  const refresh = useCallback(async () => {
    try {
      setSession(await call<SessionInfo>('GET', '/api/v1/session'));
    } catch (err) {
      if (err instanceof ConsoleError && err.status === 401) setSession(null);
      else throw err;
    }
  }, []);
  useEffect(() => {
    void refresh();
  }, [refresh]);

  const signOut = async (everywhere: boolean) => {
    if (everywhere) await call('POST', '/api/v1/auth/revoke-sessions', {});
    await call('POST', '/api/v1/auth/sign-out', {});
    setSession(null);
    navigate('/sign-in');
  };

  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <Link href="/" className="brand">
          Lenstack <span>console</span>
        </Link>
        {session && (
          <nav aria-label="Account">
            <span className="who">{session.user.email}</span>
            <Link href="/account" className="button quiet">
              Account
            </Link>
            <button type="button" className="quiet" onClick={() => void signOut(false)}>
              Sign out
            </button>
            <button type="button" className="quiet" onClick={() => void signOut(true)}>
              Sign out everywhere
            </button>
          </nav>
        )}
      </header>
      <main id="main">
        <Switch>
          <Route path="/sign-in">
            <SignIn onSignedIn={async () => { await refresh(); navigate(nextPath()); }} />
          </Route>
          <Route path="/invitations/accept">
            <AcceptInvitation session={session} onAccepted={async () => { await refresh(); navigate('/'); }} />
          </Route>
          <Route path="/sign-up">
            <SignUp onSignedUp={(email) => navigate(`/check-mail?email=${encodeURIComponent(email)}`)} />
          </Route>
          <Route path="/reset-password">
            <ResetPassword onDone={() => navigate('/sign-in?reset=1')} />
          </Route>
          <Route path="/account">
            {session === undefined ? (
              <p aria-live="polite">Loading…</p>
            ) : session === null ? (
              <Welcome />
            ) : (
              <Account onSignedOut={() => { setSession(null); navigate('/sign-in'); }} />
            )}
          </Route>
          <Route path="/check-mail">
            <CheckMail />
          </Route>
          <Route path="/batches/:id">
            {(params) =>
              session === undefined ? <p aria-live="polite">Loading…</p> : session === null ? <Welcome /> : (
                <Suspense fallback={<p aria-busy="true">Loading…</p>}>
                  <BatchPage key={params.id} id={params.id} />
                </Suspense>
              )
            }
          </Route>
          <Route path="/dev/mailbox">
            <DevMailbox />
          </Route>
          <Route>
            {session === undefined ? (
              <p aria-live="polite">Loading…</p>
            ) : session === null ? (
              <Welcome />
            ) : (
              <Dashboard session={session} onChanged={refresh} />
            )}
          </Route>
        </Switch>
      </main>
    </>
  );
}

function Welcome() {
  return (
    <section className="card narrow">
      <h1>Photo analysis, billed once per photo</h1>
      <p>Sign in to create API keys, watch your credits and see what each analysis cost.</p>
      <p className="actions">
        <Link href="/sign-in" className="button">
          Sign in
        </Link>
        <Link href="/sign-up" className="button secondary">
          Create an account
        </Link>
      </p>
    </section>
  );
}
