import type { Client } from '@temporalio/client';
import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { AnalyzeDeps } from '../analysis/service.ts';
import type { KeyCache } from '../auth/cache.ts';
import type { EvictionBus } from '../auth/eviction-bus.ts';
import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { PaymentGateway } from '../payments/gateway.ts';
import type { RequestLimiter } from '../ratelimit/limiter.ts';
import type { Uploads } from '../uploads/service.ts';
import type { ConsoleAuth } from './auth.ts';
import type { MailCatcher, Mailer } from './mail.ts';
import type { Role } from '../accounts/workspaces.ts';

/** What the console's server is built from (web/server.ts makes them; tests inject their own). */
export interface WebDeps {
  config: Config;
  db: Db;
  auth: ConsoleAuth;
  /** Invitations are mailed from the console's routes. */
  mailer: Mailer;
  keyCache: KeyCache;
  /** Revocations reach every API process through it (absent in tests that need no fan-out). */
  evictionBus?: EvictionBus;
  /** The development mailbox: set only when `npm start` runs the local mail catcher. */
  devMailbox?: MailCatcher;
  /** The built front end (web/ui/dist); its absence leaves only the API. */
  staticDir?: string;
  logger?: Logger | false;
  /** Sign-in throttling (web/plugins/throttle.ts): Redis in web/server.ts, shared by every replica. */
  limiter: RequestLimiter;
  /**
   * The payments interface (payments/configured.ts, the API's too): Stripe Checkout when configured
   * (its webhooks grant), else the development (recording) gateway, else none.
   */
  payments?: PaymentGateway | null;
  /** Batches submitted from the console: uploads through the API's upload service, then the same submission as the API's. */
  batches?: { pipeline: AnalyzeDeps & { temporal: Client; uploads: Uploads } };
}

/** The signed-in person a console route acts for. */
export interface Person {
  id: string;
  email: string;
  name: string;
  emailVerified: boolean;
}

/** The person behind the request's session cookie, or 401 AUTH_FAILED (web/plugins/session.ts). */
export type SignedIn = (request: FastifyRequest) => Promise<Person>;

/**
 * The person behind the session and the workspace the path names (`:workspaceId`), once they are a
 * member of it in one of `roles` (default: any): else 401, 404 for a workspace that is not theirs,
 * 403 for a role too low (web/plugins/session.ts).
 */
export type MemberOf = (request: FastifyRequest, roles?: readonly Role[]) => Promise<{ person: Person; workspaceId: string }>;

/** What every route plugin of the console is given (web/app.ts makes it once). */
export interface WebContext {
  deps: WebDeps;
  /** The console's own origin (WEB_URL's): state changes come from it, links in mail point to it. */
  origin: string;
  /** `deps.payments` with its absence spelled `null`. */
  payments: PaymentGateway | null;
  signedIn: SignedIn;
  memberOf: MemberOf;
}
