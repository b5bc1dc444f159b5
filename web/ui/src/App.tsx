import { lazy, Suspense, useCallback, useEffect, useState, type ReactNode } from 'react';
import { Link, Route, Switch, useLocation } from 'wouter';
import { call, ConsoleError, type SessionInfo } from './api.ts';
import { SignIn, SignUp, CheckMail, ResetPassword } from './pages/Auth.tsx';
import { Account } from './pages/Account.tsx';
import { DevMailbox } from './pages/DevMailbox.tsx';
import { AcceptInvitation } from './pages/Invitation.tsx';
// Every section of the signed-in console is its own chunk, loaded when its address is first opened
// (docs/decisions.md "Console: JS budget"): the first load carries the shell, sign-in and the router.
const Overview = lazy(() => import('./pages/Overview.tsx').then((m) => ({ default: m.Overview })));
const ApiKeys = lazy(() => import('./pages/ApiKeys.tsx').then((m) => ({ default: m.ApiKeys })));
const Team = lazy(() => import('./pages/Team.tsx').then((m) => ({ default: m.Team })));
const Settings = lazy(() => import('./pages/Settings.tsx').then((m) => ({ default: m.Settings })));
const Batches = lazy(() => import('./pages/Batches.tsx').then((m) => ({ default: m.Batches })));
// The data cache (TanStack Query) comes with the first section too.
const QueryShell = lazy(() => import('./QueryShell.tsx'));

/** Empties the data cache (when someone signs out), if a section ever loaded it. */
async function forgetCachedData() {
  (await import('./query.ts')).queryClient.clear();
}
// A batch's page (reports, thumbnails) loads with its first visit, not with every console page.
const BatchPage = lazy(() => import('./pages/BatchPage.tsx').then((m) => ({ default: m.BatchPage })));
// Requests and Usage & billing, likewise: each its own chunk, loaded when its address is opened.
const Requests = lazy(() => import('./pages/Requests.tsx').then((m) => ({ default: m.Requests })));
const RequestPage = lazy(() => import('./pages/Requests.tsx').then((m) => ({ default: m.RequestPage })));
const Usage = lazy(() => import('./pages/Usage.tsx').then((m) => ({ default: m.Usage })));
const Playground = lazy(() => import('./pages/Playground.tsx').then((m) => ({ default: m.Playground })));
const Photos = lazy(() => import('./pages/Photos.tsx').then((m) => ({ default: m.Photos })));

/** The signed-in console's sections, each at its own address (issue 26 §1; docs/console.md). */
const SECTIONS = [
  { href: '/', label: 'Overview' },
  { href: '/playground', label: 'Playground' },
  { href: '/requests', label: 'Requests' },
  { href: '/photos', label: 'Photos' },
  { href: '/batches', label: 'Batches' },
  { href: '/usage', label: 'Usage & billing' },
  { href: '/keys', label: 'API keys' },
  { href: '/team', label: 'Team' },
  { href: '/settings', label: 'Settings' },
] as const;

function SectionNav() {
  const [location] = useLocation();
  const current = (href: string) => (href === '/' ? location === '/' : location === href || location.startsWith(`${href}/`));
  return (
    <nav aria-label="Sections" className="sections">
      {SECTIONS.map((s) => (
        <Link key={s.href} href={s.href} aria-current={current(s.href) ? 'page' : undefined}>
          {s.label}
        </Link>
      ))}
    </nav>
  );
}

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
    // Nothing of this person's workspaces stays in the cache for whoever signs in next.
    await forgetCachedData();
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
      {session && session.workspaces.length > 0 && <SectionNav />}
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
              <Account onSignedOut={() => { void forgetCachedData(); setSession(null); navigate('/sign-in'); }} />
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
          <Route path="/requests">
            {signedInOnly(session, (s) => <Requests session={s} />)}
          </Route>
          <Route path="/requests/:id">
            {(params) => signedInOnly(session, (s) => <RequestPage session={s} id={params.id} />)}
          </Route>
          <Route path="/photos">
            {signedInOnly(session, (s) => <Photos session={s} />)}
          </Route>
          <Route path="/usage">
            {signedInOnly(session, (s) => <Usage session={s} />)}
          </Route>
          <Route path="/playground">
            {signedInOnly(session, (s) => <Playground session={s} />)}
          </Route>
          <Route path="/batches">
            {signedInOnly(session, (s) => <Batches session={s} />)}
          </Route>
          <Route path="/keys">
            {signedInOnly(session, (s) => <ApiKeys session={s} />)}
          </Route>
          <Route path="/team">
            {signedInOnly(session, (s) => <Team session={s} onChanged={refresh} />)}
          </Route>
          <Route path="/settings">
            {signedInOnly(session, (s) => <Settings session={s} onChanged={refresh} />)}
          </Route>
          <Route path="/dev/mailbox">
            <DevMailbox />
          </Route>
          <Route>{signedInOnly(session, (s) => <Overview session={s} />)}</Route>
        </Switch>
      </main>
    </>
  );
}

/** A lazily loaded section for a signed-in person: the welcome page otherwise. */
function signedInOnly(session: SessionInfo | null | undefined, page: (s: SessionInfo) => ReactNode) {
  if (session === undefined) return <p aria-live="polite">Loading…</p>;
  if (session === null) return <Welcome />;
  return (
    <Suspense fallback={<p aria-busy="true">Loading…</p>}>
      <QueryShell>{page(session)}</QueryShell>
    </Suspense>
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
