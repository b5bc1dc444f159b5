import type { ConsoleStack } from './console-stack.ts';

export const PASSWORD = 'lantern orbit cactus violin';

/** The cookies a response sets, as one Cookie header for the next request. */
export function cookieFrom(res: Response): string {
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0]!)
    .join('; ');
}

export interface Person {
  email: string;
  cookie: string;
  /** Their own workspace. */
  workspaceId: string;
}

/**
 * A person made the way a browser makes one, over HTTP: sign up, follow the mailed confirmation
 * link, sign in with the password. Returns the session cookie.
 */
export async function signUpOverHttp(stack: ConsoleStack, email: string, opts: { name?: string; password?: string } = {}): Promise<Person> {
  const password = opts.password ?? PASSWORD;
  const post = (path: string, body: unknown) =>
    fetch(`${stack.url}${path}`, { method: 'POST', headers: { origin: stack.url, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const up = await post('/api/v1/auth/sign-up/email', { name: opts.name ?? 'Ada', email, password });
  if (up.status !== 200) throw new Error(`sign-up ${up.status}: ${await up.text()}`);
  const mail = await stack.mail.waitFor((m) => m.to.includes(email) && m.subject === 'Confirm your e-mail address for Lenstack');
  const link = /https?:\/\/\S+/.exec(mail.text)![0];
  await fetch(link, { redirect: 'manual' });
  const signIn = await post('/api/v1/auth/sign-in/email', { email, password });
  if (signIn.status !== 200) throw new Error(`sign-in ${signIn.status}: ${await signIn.text()}`);
  const cookie = cookieFrom(signIn);
  const session = (await (await fetch(`${stack.url}/api/v1/session`, { headers: { cookie } })).json()) as { workspaces: Array<{ id: string }> };
  return { email, cookie, workspaceId: session.workspaces[0]!.id };
}

/** A console call as the console's own page makes it (same origin, the person's cookie). */
export function consoleCall(stack: ConsoleStack, person: { cookie: string }, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${stack.url}${path}`, {
    method,
    headers: { cookie: person.cookie, origin: stack.url, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** The owner invites the person by mail; the person accepts with their session. */
export async function joinWorkspace(stack: ConsoleStack, owner: { cookie: string }, workspaceId: string, person: Person, role: 'admin' | 'member'): Promise<void> {
  // This invitation's mail, not an earlier one to the same person.
  const seen = Math.max(0, ...stack.mail.messages().map((m) => m.id));
  const invited = await consoleCall(stack, owner, 'POST', `/api/v1/workspaces/${workspaceId}/invitations`, { email: person.email, role });
  if (invited.status !== 201) throw new Error(`invitation ${invited.status}: ${await invited.text()}`);
  const mail = await stack.mail.waitFor((m) => m.id > seen && m.to.includes(person.email) && m.subject.startsWith('You are invited'));
  const token = new URL(/https?:\/\/\S+/.exec(mail.text)![0]).searchParams.get('token')!;
  const accepted = await consoleCall(stack, person, 'POST', '/api/v1/invitations/accept', { token });
  if (accepted.status !== 200) throw new Error(`accept ${accepted.status}: ${await accepted.text()}`);
}

/** Addresses nobody else in the run uses: `${prefix}<pid>-<time>-<n>@example.test`. */
export function emailMaker(prefix: string): () => string {
  let counter = 0;
  return () => `${prefix}${process.pid}-${Date.now()}-${counter++}@example.test`;
}

/** The person's session cookie as a browser holds it (Playwright's addCookies), for the console. */
export function browserCookies(stack: Pick<ConsoleStack, 'url'>, person: { cookie: string }) {
  return person.cookie.split('; ').map((kv) => {
    const at = kv.indexOf('=');
    return { name: kv.slice(0, at), value: kv.slice(at + 1), url: stack.url, httpOnly: true, sameSite: 'Lax' as const };
  });
}
