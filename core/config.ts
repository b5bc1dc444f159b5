import { z } from 'zod';
import { VENDOR_DEFAULT_MODEL, VENDOR_ENV_PREFIX, VENDOR_NAMES, type VendorName } from './vendor-names.ts';

/**
 * All configuration, parsed once per process from the environment (one parse, one owner of the environment).
 * Nothing else reads process.env; the parsed object is passed down.
 */
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** The vendors' names come from core/vendor-names.ts, the one list (docs/architecture.md, "Adding a vendor"). */
export const vendorName = z.enum(VENDOR_NAMES);

type VendorPrefix = (typeof VENDOR_ENV_PREFIX)[VendorName];

/**
 * One variable per vendor, `<PREFIX>_<suffix>`, named from core/vendor-names.ts's prefixes (typed
 * keys: `config.OPENAI_API_KEY` is checked by the compiler as if spelled out).
 */
function perVendor<const Suffix extends string, S extends z.ZodType>(suffix: Suffix, schema: (vendor: VendorName) => S): { [P in VendorPrefix as `${P}_${Suffix}`]: S } {
  return Object.fromEntries(VENDOR_NAMES.map((v) => [`${VENDOR_ENV_PREFIX[v]}_${suffix}`, schema(v)])) as { [P in VendorPrefix as `${P}_${Suffix}`]: S };
}

/** `vars` grouped by vendor in the order of core/vendor-names.ts, each vendor's in the order given. */
function byVendor<T extends Record<string, z.ZodType>>(vars: T): T {
  const rank = (key: string) => VENDOR_NAMES.findIndex((v) => key.startsWith(`${VENDOR_ENV_PREFIX[v]}_`));
  return Object.fromEntries(Object.entries(vars).sort(([a], [b]) => rank(a) - rank(b))) as T;
}

/**
 * Each vendor's variables: its endpoint, key and model (`<PREFIX>_BASE_URL`, `_API_KEY`,
 * `_MODEL`), then its account's rate limits (`_RPM`, `_TPM`).
 */
const vendorVariables = byVendor({
  ...perVendor('BASE_URL', () => z.url().optional()),
  ...perVendor('API_KEY', () => z.string().min(1).optional()),
  ...perVendor('MODEL', (v) => z.string().default(VENDOR_DEFAULT_MODEL[v])),
});
const vendorRateVariables = byVendor({
  ...perVendor('RPM', () => z.coerce.number().int().min(0).default(0)),
  ...perVendor('TPM', () => z.coerce.number().int().min(0).default(0)),
});

/** IMAGE_MAX_PIXELS unless configured: also the limit of a decode whose caller holds no config. */
export const DEFAULT_IMAGE_MAX_PIXELS = 100_000_000;

export const configSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  HOST: z.string().default('0.0.0.0'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * How log lines look: `json` (one JSON object a line), `pretty` (pino-pretty: coloured, one
   * readable line each), `auto` = pretty when the process's stdout is a terminal, JSON otherwise.
   */
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  DATABASE_URL: z.url().default('postgres://postgres@127.0.0.1:5432/lenstack'),
  REDIS_URL: z.url().default('redis://127.0.0.1:6379'),
  /** Redis key prefix; tests give each run its own so runs can overlap. */
  REDIS_PREFIX: z.string().default('lenstack:'),
  /**
   * How long a rate-limit check waits for Redis before the request goes through unlimited (the
   * limiter fails open, and says so in the log). A Redis further away than the same host, or a
   * machine that stalls, may want longer.
   */
  RATE_LIMIT_TIMEOUT_MS: z.coerce.number().int().min(10).max(60_000).default(500),
  TEMPORAL_ADDRESS: z.string().optional(),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  /** The workers' task queue; interactive analyses run on `<this>-interactive` (interactiveTaskQueue). */
  TEMPORAL_TASK_QUEUE: z.string().default('lenstack-analyze'),
  /** Shared secret for server-to-server calls (x-internal-secret). Unset = internal auth disabled. */
  INTERNAL_SECRET: z.string().min(32, 'INTERNAL_SECRET must be at least 32 characters').optional(),
  /** Where `npm start` keeps its local state: the Temporal dev server's SQLite file and log, the secrets it generates. */
  DATA_DIR: z.string().default('.data'),
  BLOB_DIR: z.string().default('.data/blobs'),
  /** Bytes of unfinished or untaken console uploads one person may hold at once in workspaces that never bought credits (besides the account's own quota). */
  UPLOAD_QUOTA_BYTES: z.coerce.number().int().min(1).default(2 * 1024 ** 3),
  /**
   * Bytes of uploads one account may hold over the API at once (POST /v1/uploads: unfinished ones
   * at their declared size, finished ones until they expire or are deleted). Room for a full
   * 10,000-photo batch of phone photos (uploads/service.ts; docs/decisions.md).
   */
  ACCOUNT_UPLOAD_QUOTA_BYTES: z.coerce.number().int().min(1).default(100 * 1024 ** 3),
  /**
   * The upload quota of an account that has never bought credits (no purchased grant in the
   * ledger): storage is not free for it either (docs/decisions.md, "No storage without payment").
   */
  ACCOUNT_UPLOAD_QUOTA_UNPAID_BYTES: z.coerce.number().int().min(1).default(2 * 1024 ** 3),
  /** An API upload is expired this long after its creation, however often billed requests used it. */
  UPLOAD_MAX_AGE_MS: z.coerce.number().int().positive().default(7 * 24 * 3600_000),
  /** An API upload no billed request (analyze, batches, enrich; not lookup) used for this long is deleted by the collector (docs/decisions.md). */
  UPLOAD_TTL_MS: z.coerce.number().int().positive().default(24 * 3600_000),
  /**
   * Where image bytes live: `fs` (BLOB_DIR, one machine) or `s3` (an S3-compatible bucket that API
   * and worker processes on several hosts share).
   */
  BLOB_STORE: z.enum(['fs', 's3']).default('fs'),
  /** Photos a batch workflow run handles before it continues as new (keeps its history bounded). */
  BATCH_PHOTOS_PER_RUN: z.coerce.number().int().min(1).max(2000).default(200),
  /** Photos analyzed at once across all running batches of one workspace (each batch at most 4). */
  BATCH_WORKSPACE_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(8),
  /**
   * How long a paused batch (by request or for credits) waits for `resume`: then its workflow ends,
   * the batch is cancelled and its pending photos fail as expired, so their bytes are collected.
   */
  BATCH_PAUSED_EXPIRY_MS: z.coerce.number().int().min(1000).default(7 * 24 * 3600 * 1000),
  /**
   * How long a vehicle of an awaitUploads batch waits, from its turn, for uploads still arriving;
   * then the ones missing fail it (docs/decisions.md, "The fleet's analysis overlaps its uploads").
   */
  BATCH_UPLOAD_WAIT_MS: z.coerce.number().int().min(1000).default(10 * 60_000),
  /** Batch exports one account may have running at once on one process (API or console); 429 beyond. */
  EXPORTS_PER_ACCOUNT: z.coerce.number().int().min(1).max(100).default(2),
  /** Batch exports running at once on one process, every account together; 503 beyond. */
  EXPORTS_IN_FLIGHT: z.coerce.number().int().min(1).max(1000).default(4),
  S3_BUCKET: z.string().min(3).max(63).optional(),
  /** Key prefix inside the bucket, e.g. `lenstack/`. */
  S3_PREFIX: z.string().max(200).default(''),
  /** Endpoint of a non-AWS server (MinIO, versitygw, R2 …); unset = AWS for S3_REGION. */
  S3_ENDPOINT: z.url().optional(),
  S3_REGION: z.string().default('us-east-1'),
  /** Path-style addressing (http://host/bucket/key), which most self-hosted servers need. */
  S3_FORCE_PATH_STYLE: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
  /** Static credentials; unset = the AWS SDK's default chain (environment, profile, instance role). */
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  /** The web console (web/server.ts): its port and the public base address people open. */
  WEB_PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  /** Public base of the console (links in e-mail, OAuth callbacks, cookie security). Default http://localhost:WEB_PORT. */
  WEB_URL: z.url().optional(),
  /** Signs console sessions and auth tokens. `npm start` generates one into .data when unset; required in production. */
  AUTH_SECRET: z.string().min(32, 'AUTH_SECRET must be at least 32 characters').optional(),
  /** Outgoing mail (smtp://user:pass@host:port or smtps://…). Unset: `npm start` runs a local mail catcher. */
  SMTP_URL: z.url().optional(),
  MAIL_FROM: z.string().default('Lenstack <no-reply@lenstack.localhost>'),
  /**
   * Without SMTP_URL, keep the console's mail in a development mailbox anyone who reaches the
   * console can read (every sign-in link): only when asked for, and only with HOST on loopback.
   * `npm start` asks for it when SMTP_URL is unset.
   */
  DEV_MAILBOX: bool.default(false),
  /** Console sign-in with GitHub (or GitHub Enterprise: its base and API addresses). No client id = the button is hidden. */
  GITHUB_CLIENT_ID: z.string().optional(),
  GITHUB_CLIENT_SECRET: z.string().optional(),
  GITHUB_BASE_URL: z.url().default('https://github.com'),
  GITHUB_API_URL: z.url().default('https://api.github.com'),
  /** Console sign-in with Google, through OpenID Connect discovery at GOOGLE_ISSUER. */
  GOOGLE_CLIENT_ID: z.string().optional(),
  GOOGLE_CLIENT_SECRET: z.string().optional(),
  GOOGLE_ISSUER: z.url().default('https://accounts.google.com'),
  /** Pack purchases (API and console) through Stripe Checkout; the webhook secret verifies Stripe's events (payments/configured.ts). */
  STRIPE_SECRET_KEY: z.string().optional(),
  STRIPE_WEBHOOK_SECRET: z.string().optional(),
  STRIPE_API_URL: z.url().default('https://api.stripe.com'),
  /** Trusted reverse proxies (comma-separated IPs/CIDRs) whose X-Forwarded-For is honoured. */
  TRUSTED_PROXIES: z.string().default(''),
  /** Maximum decoded image size in bytes (fetched or base64). */
  IMAGE_MAX_BYTES: z.coerce.number().int().positive().default(50 * 1024 * 1024),
  /** Largest request body accepted by the image-carrying endpoints (analyze, lookup, enrich). */
  MAX_BODY_BYTES: z.coerce.number().int().positive().default(100 * 1024 * 1024),
  /** Bytes of large request bodies one API process reads and holds at once; 503 with Retry-After beyond. */
  BODY_BYTES_IN_FLIGHT: z.coerce.number().int().positive().default(400 * 1024 * 1024),
  /** Maximum decoded pixel count (decompression-bomb guard). */
  IMAGE_MAX_PIXELS: z.coerce.number().int().positive().default(DEFAULT_IMAGE_MAX_PIXELS),
  /**
   * Who decodes HEIC (images/heic-native.ts): `auto` = the native decoder (the system's libheif)
   * when it is built and answers, libheif's WASM build otherwise; `native` = the native one or
   * refuse to start; `wasm` = always the WASM build.
   */
  HEIC_DECODER: z.enum(['auto', 'native', 'wasm']).default('auto'),
  /** The native decoder's binary (images/heif-decode.c), when not where `npm run heic-decoder` builds it. */
  HEIC_DECODER_PATH: z.string().optional(),
  /** How long an analysis (or vehicle report) workflow may run: its execution timeout. */
  WORKFLOW_TIMEOUT_MS: z.coerce.number().int().positive().default(10 * 60 * 1000),
  /**
   * How long a workflow's credit reservation stays open before the worker's sweeper may release it
   * (a terminated or timed-out workflow never releases its own). Must exceed WORKFLOW_TIMEOUT_MS.
   */
  RESERVATION_TTL_MS: z.coerce.number().int().positive().default(15 * 60 * 1000),
  /** Vendor calls an account may make per UTC day without paying for them (free lenses, failed runs). */
  FREE_VENDOR_CALLS_PER_DAY: z.coerce.number().int().positive().default(1000),
  /** A blob no registry holds is collected once it is this old (longer than any analysis may run). */
  BLOB_GC_GRACE_MS: z.coerce.number().int().positive().default(60 * 60 * 1000),
  /** How often the worker looks for such blobs. */
  BLOB_GC_INTERVAL_MS: z.coerce.number().int().positive().default(10 * 60 * 1000),
  /**
   * Bytes of vendor work copies a worker keeps (vendors/work-copies.ts): each original is decoded
   * once per analysis, and its retries and fallbacks reuse the copy (at most ~1.5 MB per image).
   */
  WORK_COPY_CACHE_BYTES: z.coerce.number().int().positive().default(128 * 1024 * 1024),

  /** Each vendor's endpoint (unset = its SDK's default), API key and model (core/vendor-names.ts's prefixes and defaults). */
  ...vendorVariables,
  /**
   * Each vendor's rate limits for this deployment's account, requests and tokens (input + output)
   * per minute: one budget every worker shares in Redis (vendors/budget.ts). Unset or 0 = no limit
   * known: calls are not paced, but a 429's Retry-After still pauses every worker.
   */
  ...vendorRateVariables,
  /** Share of each vendor budget's short-term burst that only interactive calls may take: batch work yields to them. */
  VENDOR_INTERACTIVE_RESERVE: z.coerce.number().min(0).max(0.9).default(0.3),
  /**
   * A call whose vendor has no budget left within its wait goes to the next vendor of VENDOR_ORDER
   * (true), or waits for its own vendor again (false, the default) for as long as its run may.
   */
  VENDOR_OVERFLOW: bool.default(false),
  /**
   * Send the vendors' prompt-caching hints (Anthropic `cache_control`, OpenAI `prompt_cache_key`):
   * on by default; `off` sends the same prompts without them (bench/cost.ts compares the two).
   */
  VENDOR_PROMPT_CACHE: z
    .enum(['on', 'off', 'true', 'false', '1', '0', 'yes', 'no'])
    .default('on')
    .transform((v) => v === 'on' || v === 'true' || v === '1' || v === 'yes'),
  /** Fallback order of vendors, first tried first. */
  VENDOR_ORDER: z
    .string()
    .default(VENDOR_NAMES.join(','))
    .transform((s) => s.split(',').map((v) => v.trim()).filter(Boolean))
    .pipe(z.array(vendorName).min(1)),
  /** When set, every vendor without its own key is pointed at this simulated vendor server. */
  SIM_VENDOR_URL: z.url().optional(),
  /**
   * The simulator to use when NO vendor has a key (what `npm start` does for itself): becomes
   * SIM_VENDOR_URL then, and is ignored as soon as one vendor key is set, so a deployment with
   * keys never falls back to simulated answers. docker-compose.yml sets it to its sim-vendor.
   */
  SIM_VENDOR_URL_IF_NO_KEYS: z.url().optional(),

  /**
   * Graceful shutdown on SIGTERM/SIGINT. API: in-flight requests finish; one still awaiting its
   * workflow after this long answers 503 (the workflow goes on; the same x-request-id gets its
   * result). Worker: in-flight activities get this long, then are cancelled and retried elsewhere.
   */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(20_000),
  /** GET /metrics on the API port: `internal` needs the internal secret, `public` is open, `off` removes it. */
  API_METRICS: z.enum(['internal', 'public', 'off']).default('internal'),
  /** Port of the worker's Prometheus listener (GET /metrics); unset = no listener, 0 = any free port. */
  WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  WORKER_METRICS_HOST: z.string().default('127.0.0.1'),
  /**
   * `host:port` where the worker's Temporal SDK serves its own Prometheus metrics (task slots,
   * pollers, schedule-to-start and execution latencies, sticky cache); unset = not exported.
   * A separate listener from WORKER_METRICS_PORT: the SDK core serves it from Rust.
   */
  TEMPORAL_METRICS_BIND_ADDRESS: z
    .string()
    .regex(/^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):\d{1,5}$/, 'host:port, e.g. 0.0.0.0:9464 or [::]:9464')
    .optional(),
  /**
   * Which payment gateway captures pack purchases when Stripe is not configured: `none` refuses to
   * sell (503), `recording` charges no card and records every capture (development and tests,
   * never by default). A STRIPE_SECRET_KEY takes precedence (payments/configured.ts).
   */
  PAYMENTS_GATEWAY: z.enum(['none', 'recording']).default('none'),
});

export type Config = z.infer<typeof configSchema>;
export type { VendorName } from './vendor-names.ts';

/**
 * The task queue of interactive work: a single `POST /v1/analyze` or vehicle report. Every worker
 * polls it beside TEMPORAL_TASK_QUEUE with slots of its own, so an interactive run never queues
 * behind a batch's tasks (docs/decisions.md, "Interactive work ahead of batches"). Named from
 * TEMPORAL_TASK_QUEUE, so an API and a worker with the same setting always agree on it.
 */
export function interactiveTaskQueue(config: Pick<Config, 'TEMPORAL_TASK_QUEUE'>): string {
  return `${config.TEMPORAL_TASK_QUEUE}-interactive`;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings mean "unset" so `FOO= npm start` behaves like leaving FOO out.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = configSchema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  // A reservation expiring while its workflow may still run could be swept, then settled for free.
  if (parsed.data.BODY_BYTES_IN_FLIGHT < parsed.data.MAX_BODY_BYTES) {
    throw new ConfigError('Invalid configuration:\n  BODY_BYTES_IN_FLIGHT: must be at least MAX_BODY_BYTES (one largest upload must fit)');
  }
  if (parsed.data.BLOB_GC_GRACE_MS <= parsed.data.WORKFLOW_TIMEOUT_MS) {
    throw new ConfigError('Invalid configuration:\n  BLOB_GC_GRACE_MS: must be greater than WORKFLOW_TIMEOUT_MS');
  }
  if (parsed.data.RESERVATION_TTL_MS <= parsed.data.WORKFLOW_TIMEOUT_MS) {
    throw new ConfigError('Invalid configuration:\n  RESERVATION_TTL_MS: must be greater than WORKFLOW_TIMEOUT_MS');
  }
  // The recording gateway grants credits without charging anyone: never in production.
  if (parsed.data.NODE_ENV === 'production' && parsed.data.PAYMENTS_GATEWAY === 'recording') {
    throw new ConfigError('Invalid configuration:\n  PAYMENTS_GATEWAY: recording charges no card and is refused with NODE_ENV=production');
  }
  for (const p of ['GITHUB', 'GOOGLE'] as const) {
    if (Boolean(parsed.data[`${p}_CLIENT_ID`]) !== Boolean(parsed.data[`${p}_CLIENT_SECRET`])) {
      throw new ConfigError(`Invalid configuration:\n  ${p}_CLIENT_ID, ${p}_CLIENT_SECRET: set both or neither`);
    }
  }
  if (parsed.data.BLOB_STORE === 's3' && !parsed.data.S3_BUCKET) {
    throw new ConfigError('Invalid configuration:\n  S3_BUCKET: required with BLOB_STORE=s3');
  }
  if (Boolean(parsed.data.S3_ACCESS_KEY_ID) !== Boolean(parsed.data.S3_SECRET_ACCESS_KEY)) {
    throw new ConfigError('Invalid configuration:\n  S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY: set both or neither');
  }
  if (parsed.data.STRIPE_SECRET_KEY && !parsed.data.STRIPE_WEBHOOK_SECRET) {
    throw new ConfigError('Invalid configuration:\n  STRIPE_WEBHOOK_SECRET: required with STRIPE_SECRET_KEY (purchases are granted from verified webhooks only)');
  }
  if (parsed.data.NODE_ENV === 'production' && !parsed.data.AUTH_SECRET && parsed.data.WEB_URL) {
    throw new ConfigError('Invalid configuration:\n  AUTH_SECRET: required in production when the console runs (WEB_URL is set)');
  }
  const anyVendorKey = VENDOR_NAMES.some((v) => parsed.data[`${VENDOR_ENV_PREFIX[v]}_API_KEY`]);
  const config = !parsed.data.SIM_VENDOR_URL && parsed.data.SIM_VENDOR_URL_IF_NO_KEYS && !anyVendorKey ? { ...parsed.data, SIM_VENDOR_URL: parsed.data.SIM_VENDOR_URL_IF_NO_KEYS } : parsed.data;
  refuseLivePaymentsWithSimulator(config);
  return config;
}

/**
 * Credits bought with real money must not pay for the simulator's made-up answers: a live Stripe
 * key with any vendor simulated (a key forgotten or misspelt in a deployment) refuses to start.
 * `npm start` asks before it starts a simulator of its own.
 */
export function refuseLivePaymentsWithSimulator(config: Pick<Config, 'SIM_VENDOR_URL' | 'STRIPE_SECRET_KEY'>): void {
  if (config.SIM_VENDOR_URL && /^(sk|rk)_live_/.test(config.STRIPE_SECRET_KEY ?? '')) {
    throw new ConfigError(
      `Invalid configuration:\n  SIM_VENDOR_URL: vendors would be simulated while STRIPE_SECRET_KEY is a live key; customers would pay real money for made-up answers. Set the vendor API keys (${VENDOR_NAMES.map((v) => `${VENDOR_ENV_PREFIX[v]}_API_KEY`).join(', ')}) and leave SIM_VENDOR_URL unset`,
    );
  }
}

/** The console's public base address, without a trailing slash. */
export function webUrl(config: Pick<Config, 'WEB_URL' | 'WEB_PORT'>): string {
  return (config.WEB_URL ?? `http://localhost:${config.WEB_PORT}`).replace(/\/+$/, '');
}
