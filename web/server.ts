import { fileURLToPath, pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { KeyCache } from '../auth/cache.ts';
import { EvictionBus } from '../auth/eviction-bus.ts';
import { ConfigError, loadConfig, webUrl, type Config } from '../core/config.ts';
import { createLogger } from '../core/logger.ts';
import { createPool } from '../db/pool.ts';
import { RateLimiter } from '../ratelimit/limiter.ts';
import { configuredPaymentGateway } from '../payments/configured.ts';
import { buildWebApp } from './app.ts';
import { createConsoleAuth } from './auth.ts';
import { limitedMailer, smtpMailer, startMailCatcher, type MailCatcher, type Mailer } from './mail.ts';
import { isLoopbackHost } from './plugins/hardening.ts';
import { ensurePersonalWorkspace } from '../accounts/workspaces.ts';
import { Client } from '@temporalio/client';
import { connectTemporal } from '../core/temporal-connection.ts';
import { blobStoreFromConfig } from '../images/blobstore-from-config.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from '../worker/address.ts';
import { createUploads } from '../uploads/service.ts';
import { signalUploadWaiters } from '../batches/upload-waits.ts';
import { configureHeicDecoder, heicDecoderNotice } from '../images/heic-native.ts';
import { createApiMetrics } from '../metrics/api.ts';

export const UI_DIST = fileURLToPath(new URL('./ui/dist', import.meta.url));

export interface RunningWeb {
  app: FastifyInstance;
  url: string;
  /** Set when no SMTP_URL was given: the local mail catcher whose mail the console shows. */
  devMailbox: MailCatcher | null;
  close(): Promise<void>;
}

/** The console's process: its pool, sign-in, mail, and the key-eviction fan-out to the API processes. */
export async function startWeb(config: Config, opts: { logger?: boolean; staticDir?: string } = {}): Promise<RunningWeb> {
  if (!config.AUTH_SECRET) throw new ConfigError('Invalid configuration:\n  AUTH_SECRET: the console needs it to sign sessions (npm start generates one)');
  if (!config.SMTP_URL && config.NODE_ENV === 'production') {
    throw new ConfigError('Invalid configuration:\n  SMTP_URL: the console sends verification and sign-in mail; set it in production');
  }
  // The development mailbox shows every sign-in link to whoever can reach the console: only when
  // asked for, and only on a server this machine alone can reach.
  if (!config.SMTP_URL && !config.DEV_MAILBOX) {
    throw new ConfigError('Invalid configuration:\n  SMTP_URL: the console sends verification and sign-in mail; set it, or DEV_MAILBOX=true with HOST=127.0.0.1 for a local development mailbox (npm start does that)');
  }
  if (!config.SMTP_URL && !isLoopbackHost(config.HOST)) {
    throw new ConfigError(`Invalid configuration:\n  DEV_MAILBOX: the development mailbox serves every sign-in link to anyone who reaches the console, and HOST=${config.HOST} is not loopback; set HOST=127.0.0.1, or SMTP_URL`);
  }
  const db = createPool(config.DATABASE_URL, { application: 'lenstack-web' });
  const keyCache = new KeyCache();
  const evictionBus = await EvictionBus.start(config.REDIS_URL, config.REDIS_PREFIX, keyCache);
  const limiter = await RateLimiter.connect(config.REDIS_URL, { commandTimeoutMs: config.RATE_LIMIT_TIMEOUT_MS });
  const devMailbox = config.SMTP_URL ? null : await startMailCatcher();
  const smtp = smtpMailer(config.SMTP_URL ?? devMailbox!.url, config.MAIL_FROM);
  const logger = opts.logger === false ? false : createLogger(config, 'web');
  const mailer: Mailer = limitedMailer(smtp, limiter, config.REDIS_PREFIX, logger || undefined);
  const auth = createConsoleAuth({
    config,
    pool: db,
    mailer,
    ...(logger ? { log: logger } : {}),
    onEmailVerified: async (user) => {
      await ensurePersonalWorkspace(db, { id: user.id, email: user.email });
    },
  });
  // Batches from the console: uploads through the API's upload service (the shared datastore and
  // blob store, so any console process continues any upload; the worker expires them), then the
  // same submission as the API's.
  const connection = await connectTemporal(config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS);
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const blobs = blobStoreFromConfig(config);
  const uploads = createUploads({ db, blobs, config, onSettled: signalUploadWaiters({ db, temporal }) });
  const app = await buildWebApp({
    config,
    db,
    batches: { pipeline: { config, db, blobs, temporal, fetchPolicy: PUBLIC_INTERNET, uploads, metrics: createApiMetrics() } },
    auth,
    mailer,
    keyCache,
    evictionBus,
    ...(devMailbox ? { devMailbox } : {}),
    limiter,
    // The same gateway, chosen the same way, as the API's (payments/configured.ts).
    payments: configuredPaymentGateway(config, db),
    staticDir: opts.staticDir ?? UI_DIST,
    logger,
  });
  // Once per process: which decoder the console's HEIC thumbnails and batch photos go to (HEIC_DECODER).
  const heic = heicDecoderNotice(await configureHeicDecoder(config));
  app.log[heic.level](heic.message);
  const host = config.HOST;
  await app.listen({ host, port: config.WEB_PORT });
  return {
    app,
    url: webUrl(config),
    devMailbox,
    async close() {
      await app.close();
      await connection.close();
      smtp.close();
      await devMailbox?.close();
      await evictionBus.close();
      await limiter.close();
      await db.end();
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const web = await startWeb(config);
  web.app.log.info({ url: web.url, devMailbox: web.devMailbox?.url ?? null }, 'console listening');
  if (web.devMailbox) web.app.log.warn('No SMTP_URL: mail goes to the DEVELOPMENT MAILBOX shown in the console, not to anyone');
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void web.close().then(() => process.exit(0));
    });
  }
}
