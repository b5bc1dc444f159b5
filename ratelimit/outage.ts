export interface OutageLog {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export const OUTAGE_LOG_EVERY_MS = 30_000;

/**
 * Makes a limiter outage loud without flooding the log: one error line when it starts, then at
 * most one per interval with how many requests went through unlimited, and one line when it ends.
 */
export class OutageReporter {
  private since: number | null = null;
  private lastLine = 0;
  private sinceLastLine = 0;
  private total = 0;

  constructor(
    private readonly log: OutageLog,
    private readonly everyMs: number = OUTAGE_LOG_EVERY_MS,
    private readonly now: () => number = Date.now,
  ) {}

  get inOutage(): boolean {
    return this.since !== null;
  }

  /** A request went through without a limit check because Redis failed. */
  failed(err: unknown): void {
    const t = this.now();
    this.sinceLastLine++;
    this.total++;
    if (this.since === null) this.since = t;
    else if (t - this.lastLine < this.everyMs) return;
    this.lastLine = t;
    this.log.error(
      { err: err instanceof Error ? `${err.name}: ${err.message}` : String(err), unlimitedRequests: this.sinceLastLine, outageMs: t - this.since },
      'rate limiter: Redis unreachable, requests are NOT rate-limited (failing open)',
    );
    this.sinceLastLine = 0;
  }

  /** A limit check succeeded; ends an outage if one was going on. */
  succeeded(): void {
    if (this.since === null) return;
    const t = this.now();
    this.log.warn({ outageMs: t - this.since, unlimitedRequests: this.total }, 'rate limiter: Redis reachable again, limits enforced');
    this.since = null;
    this.sinceLastLine = 0;
    this.total = 0;
  }
}
