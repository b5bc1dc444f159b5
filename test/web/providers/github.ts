import { createHash, randomBytes } from 'node:crypto';
import Fastify from 'fastify';

/**
 * A GitHub-protocol server for the console's tests (GITHUB_BASE_URL = url, GITHUB_API_URL =
 * url/api): the OAuth web flow with state and PKCE (S256) as GitHub runs it — an authorize page
 * the person confirms, a code exchange that checks client secret, redirect URI and verifier — and
 * the two API routes the console reads: /user and /user/emails. Who is "signed in at GitHub" is
 * set by the test.
 */
export interface GitHubPerson {
  id: number;
  login: string;
  name: string | null;
  emails: Array<{ email: string; primary: boolean; verified: boolean }>;
}

export interface GitHubStub {
  url: string;
  clientId: string;
  clientSecret: string;
  signInAs(person: GitHubPerson): void;
  /** Code exchanges refused, with why (wrong secret, verifier, reused code …). */
  refusals: string[];
  close(): Promise<void>;
}

export async function startGitHubStub(): Promise<GitHubStub> {
  const clientId = `Iv1.${randomBytes(8).toString('hex')}`;
  const clientSecret = randomBytes(20).toString('hex');
  let current: GitHubPerson | null = null;
  const codes = new Map<string, { person: GitHubPerson; redirectUri: string; challenge: string | undefined }>();
  const tokens = new Map<string, GitHubPerson>();
  const refusals: string[] = [];
  const app = Fastify();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  app.get('/login/oauth/authorize', async (request, reply) => {
    const q = request.query as Record<string, string>;
    if (q.client_id !== clientId) return reply.code(404).type('text/html').send('<p>Unknown application</p>');
    if (!current) return reply.code(401).type('text/html').send('<p>Not signed in to GitHub</p>');
    const hidden = ['redirect_uri', 'state', 'code_challenge', 'code_challenge_method']
      .map((k) => `<input type="hidden" name="${k}" value="${(q[k] ?? '').replace(/"/g, '&quot;')}">`)
      .join('');
    return reply.type('text/html').send(
      `<!doctype html><html lang="en"><title>Authorize</title><main><h1>Authorize Lenstack</h1><p>Signed in as ${current.login}</p>` +
        `<form method="post" action="/login/oauth/authorize">${hidden}<button type="submit">Authorize</button></form></main></html>`,
    );
  });

  app.post('/login/oauth/authorize', async (request, reply) => {
    const f = request.body as Record<string, string>;
    if (f.code_challenge && f.code_challenge_method !== 'S256') return reply.code(400).send('only S256');
    const code = randomBytes(10).toString('hex');
    codes.set(code, { person: current!, redirectUri: f.redirect_uri!, challenge: f.code_challenge || undefined });
    const to = new URL(f.redirect_uri!);
    to.searchParams.set('code', code);
    to.searchParams.set('state', f.state ?? '');
    return reply.redirect(to.toString());
  });

  app.post('/login/oauth/access_token', async (request, reply) => {
    const f = request.body as Record<string, string>;
    const basic = request.headers.authorization?.startsWith('Basic ') ? Buffer.from(request.headers.authorization.slice(6), 'base64').toString().split(':') : null;
    const id = f.client_id ?? basic?.[0];
    const secret = f.client_secret ?? basic?.[1];
    const grant = codes.get(f.code ?? '');
    codes.delete(f.code ?? '');
    const refuse = (why: string) => {
      refusals.push(why);
      return reply.send({ error: 'bad_verification_code', error_description: why });
    };
    if (id !== clientId || secret !== clientSecret) return refuse('client credentials');
    if (!grant) return refuse('unknown or reused code');
    if (grant.redirectUri !== f.redirect_uri) return refuse('redirect_uri mismatch');
    if (grant.challenge) {
      const computed = createHash('sha256').update(f.code_verifier ?? '').digest('base64url');
      if (computed !== grant.challenge) return refuse('PKCE verifier');
    }
    const token = `gho_${randomBytes(16).toString('hex')}`;
    tokens.set(token, grant.person);
    return reply.send({ access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
  });

  const personOf = (authorization: string | undefined) => tokens.get((authorization ?? '').replace(/^(Bearer|token) /i, ''));
  app.get('/api/user', async (request, reply) => {
    const p = personOf(request.headers.authorization);
    if (!p) return reply.code(401).send({ message: 'Bad credentials' });
    const publicEmail = p.emails.find((e) => e.primary)?.email ?? null;
    return { id: p.id, login: p.login, name: p.name, email: publicEmail, avatar_url: `https://avatars.example/${p.id}` };
  });
  app.get('/api/user/emails', async (request, reply) => {
    const p = personOf(request.headers.authorization);
    if (!p) return reply.code(401).send({ message: 'Bad credentials' });
    return p.emails.map((e) => ({ ...e, visibility: null }));
  });

  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url,
    clientId,
    clientSecret,
    signInAs(person) {
      current = person;
    },
    refusals,
    close: () => app.close(),
  };
}
