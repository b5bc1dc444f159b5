import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import { SLIDING_WINDOW_LUA, slidingWindowScript, type ScriptBucket } from './script.ts';

export interface BucketState<B extends ScriptBucket> {
  bucket: B;
  /** Requests the bucket still admits. */
  remaining: number;
  /** ms until the oldest request counted in the bucket leaves its window (0 when it counts none). */
  resetMs: number;
}

export interface Decision<B extends ScriptBucket> {
  admitted: boolean;
  /** The time the script decided at (ms). */
  now: number;
  /** When refused: ms until a request would be admitted by every bucket (> 0). Else 0. */
  retryAfterMs: number;
  /** When refused: the bucket with the longest wait; when admitted: the one closest to its limit. */
  tightest: BucketState<B>;
  buckets: BucketState<B>[];
}

export interface RateLimiterOptions {
  /** Clock in ms. Absent = the Redis server's clock, one clock for every API process. Tests inject one. */
  clock?: () => number;
  /** A sick Redis may add at most this much latency to a request before it fails open. */
  commandTimeoutMs?: number;
  /** How long startup waits for Redis before going on without it (it keeps reconnecting). */
  connectTimeoutMs?: number;
}

/** What the API's rate-limit plugin needs: count a request against buckets, answer whether it is admitted. */
export interface RequestLimiter {
  hit<B extends ScriptBucket>(buckets: readonly B[], opts?: { record?: boolean }): Promise<Decision<B>>;
  /** Whether its store answered at startup (else requests go through unlimited until it does, logged). */
  readonly ready: boolean;
  close(): Promise<void>;
}

export const DEFAULT_COMMAND_TIMEOUT_MS = 500;
export const DEFAULT_CONNECT_TIMEOUT_MS = 2_000;
/** Commands waiting on a Redis that stopped answering; past this they fail at once instead of queueing. */
const MAX_PENDING_COMMANDS = 1_000;

export class RateLimiterTimeout extends Error {
  override name = 'RateLimiterTimeout';
  constructor(ms: number) {
    super(`Redis did not answer the rate-limit check within ${ms} ms`);
  }
}

function makeClient(url: string, connectTimeoutMs: number) {
  return createClient({
    url,
    // While disconnected, fail now (and let the caller fail open) instead of queueing until Redis returns.
    disableOfflineQueue: true,
    commandsQueueMaxLength: MAX_PENDING_COMMANDS,
    socket: {
      connectTimeout: connectTimeoutMs,
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2_000),
    },
    scripts: { slidingWindow: slidingWindowScript },
  });
}
type Client = ReturnType<typeof makeClient>;

/**
 * Counts requests against buckets in Redis with one atomic script (script.ts), for every API
 * process alike. It only counts; whether to refuse, and what to do when Redis is away, is the
 * caller's (api/plugins/rate-limit.ts).
 */
export class RateLimiter implements RequestLimiter {
  private constructor(
    private readonly client: Client,
    private readonly clock: (() => number) | undefined,
    private readonly commandTimeoutMs: number,
  ) {}

  /**
   * Connects and loads the script. Returns after at most connectTimeoutMs even when Redis is
   * down: the client keeps reconnecting in the background and hit() fails fast until it is back.
   */
  static async connect(url: string, opts: RateLimiterOptions = {}): Promise<RateLimiter> {
    const connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const client = makeClient(url, connectTimeoutMs);
    // Outages surface as failed hit() calls, which the caller reports; the event must not crash us.
    client.on('error', () => {});
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      client
        .connect()
        .then(() => client.scriptLoad(SLIDING_WINDOW_LUA))
        .catch(() => {}),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, connectTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
    return new RateLimiter(client, opts.clock, opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS);
  }

  /** True while connected; hit() fails fast otherwise. */
  get ready(): boolean {
    return this.client.isReady;
  }

  /**
   * Admits the request if every bucket has room, recording it in all of them; otherwise records it
   * in none. With `record: false` it only answers whether a request would be admitted.
   * Rejects when Redis does not answer within the command timeout.
   */
  async hit<B extends ScriptBucket>(buckets: readonly B[], opts: { record?: boolean } = {}): Promise<Decision<B>> {
    if (buckets.length === 0) throw new Error('hit() needs at least one bucket');
    const reply = await this.withTimeout(
      this.client.slidingWindow({
        buckets,
        now: this.clock?.(),
        member: randomBytes(12).toString('base64url'),
        record: opts.record ?? true,
      }),
    );
    const [admitted, now, retryAfterMs, refusedBy] = reply.slice(0, 4).map(Number) as [number, number, number, number];
    const states = buckets.map((bucket, i) => ({
      bucket,
      remaining: Number(reply[4 + 2 * i]),
      resetMs: Number(reply[5 + 2 * i]),
    }));
    const tightest =
      admitted === 1
        ? states.reduce((a, b) => (b.remaining < a.remaining || (b.remaining === a.remaining && b.resetMs > a.resetMs) ? b : a))
        : states[refusedBy - 1]!;
    return { admitted: admitted === 1, now, retryAfterMs: admitted === 1 ? 0 : retryAfterMs, tightest, buckets: states };
  }

  /**
   * node-redis's own command timeout only covers the wait to be written, not the wait for the
   * reply, so a Redis that accepted the command and stalls is bounded here. The abandoned reply is
   * still read in order when it comes (the connection stays in step); a stall longer than
   * MAX_PENDING_COMMANDS requests makes further calls fail at once ("queue is full").
   */
  private withTimeout<T>(pending: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RateLimiterTimeout(this.commandTimeoutMs)), this.commandTimeoutMs);
    });
    pending.catch(() => {});
    return Promise.race([pending, timeout]).finally(() => clearTimeout(timer));
  }

  /** Whether the script is cached in Redis under the SHA1 the client calls it by. */
  async scriptLoaded(): Promise<boolean> {
    const [exists] = await this.client.scriptExists(slidingWindowScript.SHA1);
    return exists === 1;
  }

  async close(): Promise<void> {
    // Nothing to flush: drop the connection (and any reconnect loop) at once.
    if (this.client.isOpen) this.client.destroy();
  }
}
