import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { ensurePersonalWorkspace } from '../../accounts/workspaces.ts';
import { KeyCache } from '../../auth/cache.ts';
import { signalUploadWaiters } from '../../batches/upload-waits.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { freePort } from '../../tools/scripts/temporal.ts';
import { createUploads } from '../../uploads/service.ts';
import { buildWebApp } from '../../web/app.ts';
import { createConsoleAuth } from '../../web/auth.ts';
import { smtpMailer, startMailCatcher, type MailCatcher } from '../../web/mail.ts';
import { noRateLimits } from '../helpers/deps.ts';
import type { Pipeline } from '../helpers/pipeline.ts';
import { testConfig, type ConfigOverrides } from '../harness/env.ts';

/** The console's real server over a test pipeline, read on the wire (no browser). */
export interface ConsoleOverHttp {
  url: string;
  web: FastifyInstance;
  mail: MailCatcher;
  /** A person signed in by a mailed link (their address confirmed by it): cookie and personal workspace. */
  signIn(email: string): Promise<{ cookie: string; workspaceId: string }>;
  close(): Promise<void>;
}

/**
 * Start the console on a free port against the pipeline's database, with a mail catcher for its
 * sign-in links; `batches` gives it the batch pipeline (uploads into the pipeline's blob store);
 * `config` overrides the console's own settings.
 */
export async function startConsoleOverHttp(p: Pipeline, opts: { batches?: boolean; config?: ConfigOverrides } = {}): Promise<ConsoleOverHttp> {
  const mail = await startMailCatcher();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const config = testConfig({ ...opts.config, WEB_PORT: port, WEB_URL: url, SMTP_URL: mail.url, AUTH_SECRET: 'test-auth-secret-0123456789abcdef0123456789' });
  const mailer = smtpMailer(mail.url, config.MAIL_FROM);
  const auth = createConsoleAuth({ config, pool: p.db, mailer, onEmailVerified: async (u) => void (await ensurePersonalWorkspace(p.db, { id: u.id, email: u.email })) });
  let batches;
  if (opts.batches) {
    const blobs = new FsBlobStore(p.config.BLOB_DIR);
    const uploads = createUploads({ db: p.db, blobs, config: p.config, onSettled: signalUploadWaiters({ db: p.db, temporal: p.temporal }) });
    batches = { pipeline: { config: p.config, db: p.db, blobs, temporal: p.temporal, fetchPolicy: PUBLIC_INTERNET, uploads, metrics: createApiMetrics() } };
  }
  const web = await buildWebApp({ config, db: p.db, auth, mailer, keyCache: new KeyCache(), limiter: noRateLimits, ...(batches ? { batches } : {}) });
  await web.listen({ host: '127.0.0.1', port });
  return {
    url,
    web,
    mail,
    async signIn(email) {
      const asked = await fetch(`${url}/api/v1/auth/sign-in/magic-link`, { method: 'POST', headers: { origin: url, 'content-type': 'application/json' }, body: JSON.stringify({ email, callbackURL: '/' }) });
      expect(asked.status, await asked.clone().text()).toBe(200);
      const sent = await mail.waitFor((m) => m.to.includes(email) && m.subject === 'Your Lenstack sign-in link');
      const verified = await fetch(/https?:\/\/\S+/.exec(sent.text)![0], { redirect: 'manual' });
      const cookie = verified.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
      expect(cookie).toContain('session_token');
      const session = (await (await fetch(`${url}/api/v1/session`, { headers: { cookie } })).json()) as { workspaces: Array<{ id: string; kind: string }> };
      return { cookie, workspaceId: session.workspaces.find((w) => w.kind === 'personal')!.id };
    },
    async close() {
      // What may stay open are the test's own idle keep-alive sockets (fetch's pool), which the
      // server's close would otherwise wait on.
      const closing = web.close();
      web.server.closeAllConnections();
      await closing;
      mailer.close();
      await mail.close();
    },
  };
}

/**
 * One file uploaded by tus through a console server (`base`, the person's session cookie): created,
 * then sent whole. Its upload id. `origin` is the console's own address when `base` is a replica.
 */
export async function uploadThroughConsole(base: string, who: { cookie: string }, workspaceId: string, bytes: Buffer, opts: { origin?: string; name?: string } = {}): Promise<string> {
  const headers = { cookie: who.cookie, origin: opts.origin ?? base, 'tus-resumable': '1.0.0' };
  const meta = `workspace ${Buffer.from(workspaceId).toString('base64')},filename ${Buffer.from(opts.name ?? 'photo.jpg').toString('base64')}`;
  const created = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: { ...headers, 'upload-length': String(bytes.length), 'upload-metadata': meta } });
  expect(created.status, await created.clone().text()).toBe(201);
  const at = new URL(created.headers.get('location')!, base);
  const sent = await fetch(at, { method: 'PATCH', headers: { ...headers, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, body: bytes });
  expect(sent.status, await sent.clone().text()).toBe(204);
  return at.pathname.split('/').pop()!;
}
