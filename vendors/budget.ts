import { createClient } from 'redis';
import type { Config, VendorName } from '../core/config.ts';
import { VENDOR_NAMES } from '../core/vendor-names.ts';
import { vendorSettings } from './settings.ts';
import { VENDOR_BUDGET_LUA, vendorBudgetScript } from './budget-script.ts';

/**
 * Each vendor's rate limits as one budget shared by every worker, in Redis (budget-script.ts):
 * a call takes its slot before it goes to the vendor, a 429 shrinks the budget at once and pauses
 * it for the vendor's Retry-After, successes grow it back slowly. Batch calls leave interactive
 * calls a reserve. docs/decisions.md, "Vendor quotas".
 */

export type Lane = 'interactive' | 'batch';

export interface VendorLimits {
  /** Requests per minute; 0 = no limit known (429 pauses are still shared). */
  rpm: number;
  /** Tokens (input + output) per minute; 0 = none. */
  tpm: number;
}

export interface BudgetDecision {
  granted: boolean;
  /** When refused: ms until this lane could be granted (the pause, or the refill). */
  waitMs: number;
  /** The budget's clock at the decision (ms). */
  now: number;
}

export interface BudgetState {
  /** The adaptive factor on the configured limits (0.05 … 1). */
  factor: number;
  requests: number;
  tokens: number;
}

export interface VendorBudgetOptions {
  /** Redis key prefix (REDIS_PREFIX). */
  prefix: string;
  limits: Record<VendorName, VendorLimits>;
  /** Share of the request bucket (and of the token bucket) only interactive calls may take (VENDOR_INTERACTIVE_RESERVE). */
  interactiveReserve: number;
  /** Clock in ms; absent = the Redis server's, one clock for every worker. Tests inject one. */
  clock?: () => number;
  /** A Redis that does not answer within this long lets the call go without the budget (fail open). */
  commandTimeoutMs?: number;
}

export class BudgetUnavailable extends Error {
  override name = 'BudgetUnavailable';
}

/** The budget will have no slot for this call before the caller's wait would end. */
export class BudgetWaitTooLong extends Error {
  override name = 'BudgetWaitTooLong';
  constructor(readonly waitMs: number) {
    super(`no slot in the vendor budget for ${waitMs} ms`);
  }
}

function makeClient(url: string) {
  return createClient({
    url,
    disableOfflineQueue: true,
    commandsQueueMaxLength: 1_000,
    socket: { connectTimeout: 2_000, reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2_000) },
    scripts: { vendorBudget: vendorBudgetScript },
  });
}
type Client = ReturnType<typeof makeClient>;

export class VendorBudget {
  private constructor(
    private readonly client: Client,
    private readonly opts: VendorBudgetOptions,
  ) {}

  static async connect(url: string, opts: VendorBudgetOptions): Promise<VendorBudget> {
    const client = makeClient(url);
    client.on('error', () => {});
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      client
        .connect()
        .then(() => client.scriptLoad(VENDOR_BUDGET_LUA))
        .catch(() => {}),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, 2_000);
      }),
    ]);
    clearTimeout(timer);
    return new VendorBudget(client, opts);
  }

  private async run(vendor: VendorName, op: 'take' | 'ok' | 'throttled' | 'peek', lane: Lane, n: number, grantedAt?: number) {
    const l = this.opts.limits[vendor];
    const pending = this.client.vendorBudget({
      key: `${this.opts.prefix}vendor-budget:${vendor}`,
      op,
      now: this.opts.clock?.(),
      rpm: l.rpm,
      tpm: l.tpm,
      reserve: this.opts.interactiveReserve,
      lane: lane === 'interactive' ? 'i' : 'b',
      n,
      ...(grantedAt !== undefined ? { grantedAt } : {}),
    });
    pending.catch(() => {});
    const ms = this.opts.commandTimeoutMs ?? 500;
    let timer: NodeJS.Timeout | undefined;
    try {
      const reply = await Promise.race([
        pending,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new BudgetUnavailable(`Redis did not answer the vendor budget within ${ms} ms`)), ms);
        }),
      ]);
      return {
        granted: Number(reply[0]) === 1,
        waitMs: Number(reply[1]),
        now: Number(reply[2]),
        factor: Number(reply[3]),
        requests: Number(reply[4]),
        tokens: Number(reply[5]),
      };
    } catch (err) {
      throw err instanceof BudgetUnavailable ? err : new BudgetUnavailable(`vendor budget: ${(err as Error).message}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  /** One ask: a slot now, or how long until this lane could have one. */
  async take(vendor: VendorName, lane: Lane, estimatedTokens: number): Promise<BudgetDecision> {
    const r = await this.run(vendor, 'take', lane, estimatedTokens);
    return { granted: r.granted, waitMs: r.waitMs, now: r.now };
  }

  /**
   * Waits for a slot, asking again when the budget says one may be free, until granted; rejects
   * with `signal`'s reason when it aborts (the activity cancelled, or its wait deadline passed).
   * With `giveUpAt` (ms on Date.now's clock), a wait that would end past it throws
   * BudgetWaitTooLong at once instead (a caller with somewhere else to go).
   */
  async acquire(vendor: VendorName, lane: Lane, estimatedTokens: number, signal: AbortSignal, opts: { giveUpAt?: number } = {}): Promise<BudgetDecision> {
    for (;;) {
      signal.throwIfAborted();
      const d = await this.take(vendor, lane, estimatedTokens);
      if (d.granted) return d;
      if (opts.giveUpAt !== undefined && Date.now() + d.waitMs > opts.giveUpAt) throw new BudgetWaitTooLong(d.waitMs);
      await sleep(d.waitMs, signal);
    }
  }

  /** A call answered: its real token use corrects the estimate, and the budget grows a little. */
  async settle(vendor: VendorName, use: { estimatedTokens: number; usedTokens: number }): Promise<void> {
    await this.run(vendor, 'ok', 'batch', use.usedTokens - use.estimatedTokens);
  }

  /** A call answered 429: the budget shrinks at once and pauses for the vendor's Retry-After. */
  async throttled(vendor: VendorName, info: { retryAfterMs?: number | undefined; grantedAt: number }): Promise<void> {
    await this.run(vendor, 'throttled', 'batch', Math.max(0, Math.round(info.retryAfterMs ?? 0)), info.grantedAt);
  }

  async state(vendor: VendorName): Promise<BudgetState> {
    const r = await this.run(vendor, 'peek', 'batch', 0);
    return { factor: r.factor, requests: r.requests, tokens: r.tokens };
  }

  async close(): Promise<void> {
    if (this.client.isOpen) this.client.destroy();
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      signal.removeEventListener('abort', abort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', abort, { once: true });
  });
}

/** The worker's budget from its configuration: the limits of every vendor, under REDIS_PREFIX. */
export function vendorBudgetFromConfig(config: Config): Promise<VendorBudget> {
  return VendorBudget.connect(config.REDIS_URL, {
    prefix: config.REDIS_PREFIX,
    interactiveReserve: config.VENDOR_INTERACTIVE_RESERVE,
    limits: Object.fromEntries(
      VENDOR_NAMES.map((v) => {
        const { rpm, tpm } = vendorSettings(config, v);
        return [v, { rpm, tpm }];
      }),
    ) as Record<VendorName, { rpm: number; tpm: number }>,
  });
}
