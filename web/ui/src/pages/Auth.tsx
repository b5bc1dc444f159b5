import { useEffect, useState, type FormEvent } from 'react';
import { Link } from 'wouter';
import { call, ConsoleError } from '../api.ts';
import { ErrorNote } from '../ErrorNote.tsx';

const MIN = 15;

function useSubmit() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async (fn: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err instanceof ConsoleError ? err.message : 'Something went wrong; try again.');
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, setError };
}

/** "Continue with GitHub / Google": only the providers this server has credentials for. */
function ProviderButtons({ onError }: { onError: (message: string) => void }) {
  const [providers, setProviders] = useState<Array<{ id: string; name: string }>>([]);
  useEffect(() => {
    call<{ providers: Array<{ id: string; name: string }> }>('GET', '/api/v1/auth-methods')
      .then((m) => setProviders(m.providers))
      .catch(() => setProviders([]));
  }, []);
  if (providers.length === 0) return null;
  const start = async (id: string) => {
    try {
      const r = await call<{ url: string }>('POST', '/api/v1/auth/sign-in/social', { provider: id, callbackURL: '/', errorCallbackURL: '/sign-in?error=provider' });
      window.location.assign(r.url);
    } catch (err) {
      onError(err instanceof ConsoleError ? err.message : 'Could not reach the sign-in provider; try again.');
    }
  };
  return (
    <div className="providers">
      {providers.map((p) => (
        <button key={p.id} type="button" className="secondary" onClick={() => void start(p.id)}>
          Continue with {p.name}
        </button>
      ))}
      <p className="or">or with your e-mail address</p>
    </div>
  );
}

export function SignIn({ onSignedIn }: { onSignedIn: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [linkSent, setLinkSent] = useState<string | null>(null);
  const [resetSent, setResetSent] = useState<string | null>(null);
  const { busy, error, run, setError } = useSubmit();
  const sendLink = () => {
    if (!email.includes('@')) {
      setError('Enter your e-mail address first; the link goes there.');
      return;
    }
    void run(async () => {
      await call('POST', '/api/v1/auth/sign-in/magic-link', { email, callbackURL: '/' });
      setLinkSent(email);
    });
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      try {
        await call('POST', '/api/v1/auth/sign-in/email', { email, password, callbackURL: '/' });
      } catch (err) {
        if (err instanceof ConsoleError && err.code === 'EMAIL_NOT_VERIFIED') {
          throw new ConsoleError(403, err.code, 'Confirm your e-mail address first: we have sent you a new link.');
        }
        throw err;
      }
      await onSignedIn();
    });
  };
  const forgot = () => {
    if (!email.includes('@')) {
      setError('Enter your e-mail address first; the link goes there.');
      return;
    }
    void run(async () => {
      await call('POST', '/api/v1/auth/request-password-reset', { email, redirectTo: '/reset-password' });
      setLinkSent(null);
      setResetSent(email);
    });
  };
  return (
    <section className="card narrow">
      <h1>Sign in</h1>
      {new URLSearchParams(window.location.search).get('reset') && (
        <p role="status" className="notice">
          Your new password is set and every other session is signed out. Sign in with it.
        </p>
      )}
      {new URLSearchParams(window.location.search).get('verified') && (
        <p role="status" className="notice">
          Your address is confirmed. Sign in with the password you chose — or, if you did not create this account, ask for a sign-in link and remove the password under Account.
        </p>
      )}
      {new URLSearchParams(window.location.search).get('error') && !error && (
        <p role="alert" className="error">
          Signing in with that provider did not work (no verified e-mail address, or the sign-in was cancelled). Try again or use your e-mail address.
        </p>
      )}
      <ProviderButtons onError={setError} />
      <form onSubmit={submit} noValidate>
        <label htmlFor="email">E-mail address</label>
        <input id="email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <label htmlFor="password">Password</label>
        <input id="password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        <ErrorNote text={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <button type="button" className="secondary" disabled={busy} onClick={sendLink}>
          E-mail me a sign-in link instead
        </button>
      </form>
      {linkSent && (
        <p role="status" className="notice">
          If {linkSent} can sign in, a link is on its way: it works once, for 10 minutes.
        </p>
      )}
      {resetSent && (
        <p role="status" className="notice">
          If {resetSent} has an account, a link to set a new password is on its way: it works once, for 30 minutes.
        </p>
      )}
      <p>
        <button type="button" className="quiet" disabled={busy} onClick={forgot}>
          Forgot your password?
        </button>
      </p>
      <p>
        New here? <Link href="/sign-up">Create an account</Link>
      </p>
    </section>
  );
}

export function SignUp({ onSignedUp }: { onSignedUp: (email: string) => void }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, run, setError } = useSubmit();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const next = new URLSearchParams(window.location.search).get('next');
      // Confirming does not sign in: the link lands on the sign-in page, which goes on to the page
      // that sent here (an invitation) once signed in.
      const back = next && next.startsWith('/') && !next.startsWith('//') ? `&next=${encodeURIComponent(next)}` : '';
      const callbackURL = `/sign-in?verified=1${back}`;
      await call('POST', '/api/v1/auth/sign-up/email', { name: name || email.split('@')[0], email, password, callbackURL });
      onSignedUp(email);
    });
  };
  return (
    <section className="card narrow">
      <h1>Create your account</h1>
      <ProviderButtons onError={setError} />
      <form onSubmit={submit} noValidate>
        <label htmlFor="name">Your name</label>
        <input id="name" autoComplete="name" value={name} onChange={(e) => setName(e.target.value)} />
        <label htmlFor="email">E-mail address</label>
        <input id="email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <label htmlFor="password">Password</label>
        <input
          id="password"
          type="password"
          autoComplete="new-password"
          required
          minLength={MIN}
          aria-describedby="password-hint"
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <p id="password-hint" className="hint">
          At least {MIN} characters. No rules about symbols: a few unrelated words work well.
        </p>
        <ErrorNote text={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create account'}
        </button>
      </form>
      <p>
        Have an account? <Link href="/sign-in">Sign in</Link>
      </p>
    </section>
  );
}

export function CheckMail() {
  const email = new URLSearchParams(window.location.search).get('email') ?? 'your address';
  return (
    <section className="card narrow">
      <h1>Check your mail</h1>
      <p>
        We sent a confirmation link to <strong>{email}</strong>. Open it, then sign in with your password: your workspace gets 1,000 free credits.
      </p>
      <p className="hint">
        Running Lenstack locally without SMTP? The mail is in the <Link href="/dev/mailbox">development mailbox</Link>.
      </p>
    </section>
  );
}

/** The page a password-reset mail leads to (/reset-password?token=…): choose the new password. */
export function ResetPassword({ onDone }: { onDone: () => void }) {
  const params = new URLSearchParams(window.location.search);
  const token = params.get('token');
  const [password, setPassword] = useState('');
  const { busy, error, run } = useSubmit();
  if (!token || params.get('error')) {
    return (
      <section className="card narrow">
        <h1>Set a new password</h1>
        <p role="alert" className="error">
          This link is not valid any more (it works once, for 30 minutes). Ask for a new one from the sign-in page.
        </p>
      </section>
    );
  }
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await call('POST', '/api/v1/auth/reset-password', { token, newPassword: password });
      onDone();
    });
  };
  return (
    <section className="card narrow">
      <h1>Set a new password</h1>
      <form onSubmit={submit} noValidate>
        <label htmlFor="new-password">New password</label>
        <input
          id="new-password"
          type="password"
          autoComplete="new-password"
          required
          minLength={MIN}
          aria-describedby="new-password-hint"
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <p id="new-password-hint" className="hint">
          At least {MIN} characters. Setting it signs out every session of your account.
        </p>
        <ErrorNote text={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : 'Set password'}
        </button>
      </form>
    </section>
  );
}
