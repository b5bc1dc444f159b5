import { lazy, Suspense, useCallback, useEffect, useState, type ReactNode } from 'react';
import { Link, Route, Switch, useLocation } from 'wouter';
import { call, ConsoleError, type SessionInfo } from './api.ts';
import { SignIn, SignUp, CheckMail, ResetPassword } from './pages/Auth.tsx';
import { Account } from './pages/Account.tsx';
import { DevMailbox } from './pages/DevMailbox.tsx';
import { AcceptInvitation } from './pages/Invitation.tsx';
// Every section of the signed-in console is its own chunk, loaded when its address is first opened
// (docs/decisions.md "The console's sections and its front-end shape"): the first load carries the
// shell, sign-in and the router. The data cache (TanStack Query) comes with the first section.
const chunks = {
  overview: () => import('./pages/Overview.tsx'),
  playground: () => import('./pages/Playground.tsx'),
  requests: () => import('./pages/Requests.tsx'),
  photos: () => import('./pages/Photos.tsx'),
  batches: () => import('./pages/Batches.tsx'),
  batch: () => import('./pages/BatchPage.tsx'),
  usage: () => import('./pages/Usage.tsx'),
  keys: () => import('./pages/ApiKeys.tsx'),
  team: () => import('./pages/Team.tsx'),
  settings: () => import('./pages/Settings.tsx'),
  queries: () => import('./QueryShell.tsx'),
};
const Overview = lazy(() => chunks.overview().then((m) => ({ default: m.Overview })));
const Playground = lazy(() => chunks.playground().then((m) => ({ default: m.Playground })));
const Requests = lazy(() => chunks.requests().then((m) => ({ default: m.Requests })));
const RequestPage = lazy(() => chunks.requests().then((m) => ({ default: m.RequestPage })));
const Photos = lazy(() => chunks.photos().then((m) => ({ default: m.Photos })));
const Batches = lazy(() => chunks.batches().then((m) => ({ default: m.Batches })));
const BatchPage = lazy(() => chunks.batch().then((m) => ({ default: m.BatchPage })));
const Usage = lazy(() => chunks.usage().then((m) => ({ default: m.Usage })));
const ApiKeys = lazy(() => chunks.keys().then((m) => ({ default: m.ApiKeys })));
const Team = lazy(() => chunks.team().then((m) => ({ default: m.Team })));
const Settings = lazy(() => chunks.settings().then((m) => ({ default: m.Settings })));
const QueryShell = lazy(chunks.queries);

/**
 * The chunk of the section the address names starts loading beside the session check, not after
 * it: a page opened at a section's address is no slower than when every section was in the first load.
 */
function preloadSection(path: string) {
  const [, first = '', second] = path.split('/');
  const bySection: Record<string, () => Promise<unknown>> = {
    '': chunks.overview,
    playground: chunks.playground,
    requests: chunks.requests,
    photos: chunks.photos,
    batches: second ? chunks.batch : chunks.batches,
    usage: chunks.usage,
    keys: chunks.keys,
    team: chunks.team,
    settings: chunks.settings,
  };
  const load = bySection[first];
  if (!load) return;
  void load().catch(() => undefined);
  void chunks.queries().catch(() => undefined);
}

/**
 * Empties the data cache (when someone signs out), if a section ever loaded it, and the upload
 * URLs the batch form keeps (web/ui/src/upload-urls.ts: workspaces and folder paths).
 */
async function forgetCachedData() {
  (await import('./query.ts')).queryClient.clear();
  await (await import('./upload-urls.ts')).forgetAllUploads();
}

/** The signed-in console's sections, each at its own address (issue 26 §1). */
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
    preloadSection(window.location.pathname);
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
