import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, vi } from 'vitest';
import { launchChromium } from './browser.ts';
import { createClient } from 'redis';
import { KeyCache } from '../../auth/cache.ts';
import { EvictionBus } from '../../auth/eviction-bus.ts';
import { RateLimiter } from '../../ratelimit/limiter.ts';
import { createLogger } from '../../core/logger.ts';
import type { Pipeline } from '../helpers/pipeline.ts';
import { startPipeline } from '../helpers/pipeline.ts';
import { testConfig, type ConfigOverrides } from '../harness/env.ts';
import { ensureConsoleBuilt } from '../../tools/scripts/build-web.ts';
import { buildWebApp } from '../../web/app.ts';
import { createConsoleAuth } from '../../web/auth.ts';
import { limitedMailer, smtpMailer, startMailCatcher, type MailCatcher } from '../../web/mail.ts';
import { ensurePersonalWorkspace } from '../../accounts/workspaces.ts';
import { UI_DIST } from '../../web/server.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { createUploads, type Uploads } from '../../uploads/service.ts';
import { signalUploadWaiters } from '../../batches/upload-waits.ts';
import { startStripeMock } from '../../tools/scripts/stripe-mock.ts';
import { configuredPaymentGateway } from '../../payments/configured.ts';
import type { PaymentGateway } from '../../payments/gateway.ts';
import { startGitHubStub, type GitHubStub } from './providers/github.ts';
import { startGoogleStub, type GoogleStub } from './providers/google.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { Steps } from '../harness/steps.ts';
import { LOADED_MACHINE_REDIS_MS } from '../helpers/deps.ts';

/** How long a console stack and its Chromium may take to start on a busy machine before the setup fails naming the step. */
export const STACK_SETUP_MS = 115_000;

export const STRIPE_WEBHOOK_SECRET = 'whsec_test_0123456789abcdef';

export interface ConsoleStack {
  pipeline: Pipeline;
  uploads: Uploads;
  github: GitHubStub;
  google: GoogleStub;
  web: FastifyInstance;
  url: string;
  mail: MailCatcher;
  /** The console server's log lines (JSON), as its process would write them. */
  logs: string[];
  /**
   * Another console server over the same database, sessions and origin, with other payment
   * settings (the development gateway, or none): for `inject`, not listening. Closed with the stack.
   */
  variant(payments: { stripe?: null; payments: PaymentGateway | null }): Promise<FastifyInstance>;
  // (`stripe: null`, as the tests write it, says no Stripe: the one gateway is `payments`.)
  /**
   * A second console process: its own server on its own port, its own upload service (its own tus
   * server) over the same database, datastore and blob store, and the same sessions and origin.
   * Closed with the stack.
   */
  /** Another console process on the same stack; `overrides` change its settings only. */
  replica(overrides?: ConfigOverrides): Promise<{ url: string; app: FastifyInstance }>;
  /**
   * Forget the sign-in throttle's per-address counts: every browser of the suite signs up from
   * 127.0.0.1, which one real address would not do; tests late in the file start from zero.
   */
  resetSignInThrottle(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The console against the real analyze path: the API (with a worker and the simulated vendors),
 * the console's server on a real port with real sign-in, and a real SMTP server the test reads.
 * Each has its own key cache; revocations travel between them over Redis as between processes.
 */
export async function startConsoleStack(steps = new Steps()): Promise<ConsoleStack> {
  await steps.step('the console build', () => ensureConsoleBuilt());
  const base = testConfig();
  // The API's key cache hears revocations over Redis, from the console's own bus, as in production.
  const apiKeys = new KeyCache();
  const apiBus = await steps.step("the API's eviction bus", () => EvictionBus.start(base.REDIS_URL, base.REDIS_PREFIX, apiKeys));
  const pipeline = await steps.step('the pipeline (API, worker, simulated vendors)', () => startPipeline({ deps: { keyCache: apiKeys, evictionBus: apiBus } }));
  const mail = await steps.step('the SMTP server', () => startMailCatcher());
  // The console's own address is in its config (links in mail, OAuth callbacks), so its port is
  // chosen first and held by a placeholder until the console listens: no other process can take
  // it meanwhile (seen in CI: EADDRINUSE when another suite's listener got it first).
  const held = await steps.step('a port', () => holdPort());
  const port = held.port;
  const url = `http://127.0.0.1:${port}`;
  // The identity providers, at the wire: a GitHub-protocol server and a real OpenID provider.
  const github = await steps.step('the GitHub stub', () => startGitHubStub());
  const google = await steps.step('the OpenID provider', () => startGoogleStub(`${url}/api/v1/auth/callback/google`));
  // Stripe, at the wire: Stripe's own API mock; webhooks are signed by the test with the secret.
  const stripeMock = await steps.step('stripe-mock', () => startStripeMock());
  const config = testConfig({
    WEB_PORT: port,
    WEB_URL: url,
    SMTP_URL: mail.url,
    AUTH_SECRET: 'test-auth-secret-0123456789abcdef0123456789',
    GITHUB_CLIENT_ID: github.clientId,
    GITHUB_CLIENT_SECRET: github.clientSecret,
    GITHUB_BASE_URL: github.url,
    GITHUB_API_URL: `${github.url}/api`,
    GOOGLE_CLIENT_ID: google.clientId,
    GOOGLE_CLIENT_SECRET: google.clientSecret,
    GOOGLE_ISSUER: google.issuer,
    STRIPE_SECRET_KEY: 'sk_test_123',
    STRIPE_WEBHOOK_SECRET: STRIPE_WEBHOOK_SECRET,
    STRIPE_API_URL: stripeMock.url,
    // Small enough that the quota test reaches it with a few declared uploads.
    UPLOAD_QUOTA_BYTES: 160 * 1024 * 1024,
  });
  const smtp = smtpMailer(mail.url, config.MAIL_FROM);
  const db = pipeline.db;
  const limiter = await steps.step('the rate limiter', () => RateLimiter.connect(config.REDIS_URL, { commandTimeoutMs: LOADED_MACHINE_REDIS_MS }));
  // Mail per recipient is bounded as in production (web/mail.ts).
  const mailer = limitedMailer(smtp, limiter, config.REDIS_PREFIX);
  const auth = createConsoleAuth({ config, pool: db, mailer, onEmailVerified: async (u) => void (await ensurePersonalWorkspace(db, { id: u.id, email: u.email })) });
  const webKeys = new KeyCache();
  const webBus = await steps.step("the console's eviction bus", () => EvictionBus.start(config.REDIS_URL, config.REDIS_PREFIX, webKeys));
  // The test's SMTP server doubles as the development mailbox, so that page is exercised too.
  // Batches from the console run on the pipeline's worker, their uploads through the upload
  // service over the pipeline's blob store and upload datastore, as the API's.
  const pc = pipeline.config;
  const uploads = createUploads({ db, blobs: blobStoreFromConfig(pc), config: pc, onSettled: signalUploadWaiters({ db, temporal: pipeline.temporal }) });
  const batches = { pipeline: { config: pc, db, blobs: blobStoreFromConfig(pc), temporal: pipeline.temporal, fetchPolicy: PUBLIC_INTERNET, uploads, metrics: createApiMetrics() } };
  const logs: string[] = [];
  const logger = createLogger({ LOG_LEVEL: 'info' }, 'web', { write: (line: string) => void logs.push(line) });
  const web = await steps.step('the console app', () => buildWebApp({ config, db, auth, mailer, keyCache: webKeys, evictionBus: webBus, devMailbox: mail, limiter, payments: configuredPaymentGateway(config, db), staticDir: UI_DIST, batches, logger }));
  await held.release();
  await steps.step('the console listening', () => web.listen({ host: '127.0.0.1', port }));
  const variants: FastifyInstance[] = [];
  return {
    pipeline,
    uploads,
    github,
    google,
    web,
    url,
    mail,
    logs,
    async resetSignInThrottle() {
      const redis = createClient({ url: config.REDIS_URL });
      await redis.connect();
      try {
        for await (const keys of redis.scanIterator({ MATCH: `${config.REDIS_PREFIX}console:auth:ip:*`, COUNT: 100 })) {
          if (keys.length) await redis.del(keys);
        }
      } finally {
        await redis.quit();
      }
    },
    async replica(overrides: ConfigOverrides = {}) {
      const own = createUploads({ db, blobs: blobStoreFromConfig(pc), config: pc, onSettled: signalUploadWaiters({ db, temporal: pipeline.temporal }) });
      const app = await buildWebApp({ config: { ...config, ...overrides } as typeof config, db, auth, mailer, keyCache: webKeys, limiter, batches: { pipeline: { ...batches.pipeline, uploads: own } } });
      await app.listen({ host: '127.0.0.1', port: 0 });
      variants.push(app);
      return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, app };
    },
    async variant(payments) {
      const app = await buildWebApp({ config, db, auth, mailer, keyCache: webKeys, limiter, payments: payments.payments });
      variants.push(app);
      return app;
    },
    async close() {
      for (const v of variants) await v.close();
      await web.close();
      smtp.close();
      await mail.close();
      await github.close();
      await google.close();
      await stripeMock.stop();
      await pipeline.close();
      await webBus.close();
      await apiBus.close();
      await limiter.close();
    },
  };
}

/**
 * A browser test's own limit: a page drives a whole stack (API, worker, console, Chromium) on the
 * same cores as the rest of the run, and a loaded machine makes the 30 s default a coin toss.
 */
export const BROWSER_TEST_MS = 90_000;

/**
 * One console stack and one Chromium for a test file: started before its tests (handed to
 * `ready`), closed after them, and the sign-in throttle reset before each test. Its tests get
 * BROWSER_TEST_MS each unless they say otherwise.
 */
export function consoleSuite(ready: (stack: ConsoleStack, browser: Browser) => void | Promise<void>): void {
  vi.setConfig({ testTimeout: BROWSER_TEST_MS });
  let stack: ConsoleStack | undefined;
  let browser: Browser | undefined;
  beforeAll(
    () =>
      new Steps().within(STACK_SETUP_MS, async (steps) => {
        stack = await startConsoleStack(steps);
        browser = await steps.step('Chromium', () => launchChromium());
        await steps.step('the suite\'s own setup', async () => ready(stack!, browser!));
      }),
    STACK_SETUP_MS + 5_000,
  );
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });
  beforeEach(() => stack!.resetSignInThrottle());
}

/** A free loopback port, kept bound by a placeholder until `release()`. */
async function holdPort(): Promise<{ port: number; release(): Promise<void> }> {
  const placeholder = createServer();
  placeholder.listen(0, '127.0.0.1');
  await once(placeholder, 'listening');
  return {
    port: (placeholder.address() as AddressInfo).port,
    release: () => new Promise<void>((resolve, reject) => placeholder.close((err) => (err ? reject(err) : resolve()))),
  };
}
