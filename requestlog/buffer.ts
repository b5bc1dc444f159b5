import type { Db } from '../db/pool.ts';

/** One API request as the console's Requests section shows it (no key material, no body). */
export interface RequestRecord {
  userId: string;
  at: Date;
  keyId: string;
  /** The route's operationId (`analyzeV1`), or `METHOD /pattern` for a route without one. */
  operation: string;
  method: string;
  status: number;
  errorCode: string | null;
  credits: number | null;
  latencyMs: number;
  requestId: string;
  analysisId: string | null;
  /** The error envelope the caller got, as sent (a refused request only). */
  error: string | null;
}

export interface RequestLogOptions {
  /** Rows held at most; past it a new row is dropped (counted), never waited for. */
  capacity?: number;
  /** A flush starts once this many rows wait, or every `intervalMs`. */
  batchSize?: number;
  intervalMs?: number;
  /** Rows lost: `full` (buffer at capacity) or `db` (the INSERT failed). */
  onDrop?: (reason: 'full' | 'db', rows: number, err?: unknown) => void;
  onWritten?: (rows: number) => void;
}

/**
 * The API's request log (docs/decisions.md "The console's Requests log"): `record` only pushes to
 * a bounded array, so a request never waits on it or fails because of it; one flush at a time
 * writes what waits as one multi-row INSERT (arrays unnested: one statement, twelve parameters,
 * whatever the number of rows). When Postgres is away the rows of that flush are dropped and
 * counted, not retried: a request log is worth less than the memory and the latency of keeping it.
 */
export class RequestLog {
  private rows: RequestRecord[] = [];
  private flushing: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;
  private readonly capacity: number;
  private readonly batchSize: number;

  constructor(
    private readonly db: Db,
    private readonly opts: RequestLogOptions = {},
  ) {
    this.capacity = opts.capacity ?? 10_000;
    this.batchSize = opts.batchSize ?? 500;
    this.timer = setInterval(() => void this.flush(), opts.intervalMs ?? 1_000);
    this.timer.unref();
  }

  /** How many rows wait for the next flush. */
  get pending(): number {
    return this.rows.length;
  }

  record(row: RequestRecord): void {
    if (this.rows.length >= this.capacity) {
      this.opts.onDrop?.('full', 1);
      return;
    }
    this.rows.push(row);
    if (this.rows.length >= this.batchSize && !this.flushing) void this.flush();
  }

  /** Write what waits now (the timer does it every interval; tests and shutdown call it). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (!this.rows.length) return;
    const batch = this.rows.splice(0, this.batchSize);
    this.flushing = this.write(batch).finally(() => {
      this.flushing = null;
    });
    await this.flushing;
    // More arrived than one batch: keep going until the buffer is drained.
    if (this.rows.length >= this.batchSize) await this.flush();
  }

  /**
   * Write what waits, for at most `withinMs`: at shutdown the pool may have no client to give (open
   * event streams hold theirs until the server ends them, which waits for this), so the last rows
   * are let go rather than holding the process up. Dropped rows are counted as with Postgres away.
   */
  async close(withinMs = 2_000): Promise<void> {
    clearInterval(this.timer);
    const drained = (async () => {
      while (this.rows.length || this.flushing) await this.flush();
    })();
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = await Promise.race([
      drained.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), withinMs);
      }),
    ]);
    clearTimeout(timer);
    if (gaveUp && this.rows.length) {
      this.opts.onDrop?.('db', this.rows.length);
      this.rows = [];
    }
  }

  private async write(batch: RequestRecord[]): Promise<void> {
    try {
      // A row whose key is gone (its workspace erased meanwhile) is not written: it would name
      // a workspace nobody may read any more.
      await this.db.query(
        `INSERT INTO api_requests (user_id, at, key_id, operation, method, status, error_code, credits, latency_ms, request_id, analysis_id, error)
         SELECT t.user_id, t.at, t.key_id, t.operation, t.method, t.status, t.error_code, t.credits, t.latency_ms, t.request_id, t.analysis_id, t.error::jsonb
           FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::smallint[], $7::text[], $8::int[], $9::int[], $10::text[], $11::text[], $12::text[])
                AS t(user_id, at, key_id, operation, method, status, error_code, credits, latency_ms, request_id, analysis_id, error)
           JOIN api_keys k ON k.id = t.key_id AND k.user_id = t.user_id`,
        [
          batch.map((r) => r.userId),
          batch.map((r) => r.at),
          batch.map((r) => r.keyId),
          batch.map((r) => r.operation),
          batch.map((r) => r.method),
          batch.map((r) => r.status),
          batch.map((r) => r.errorCode),
          batch.map((r) => r.credits),
          batch.map((r) => r.latencyMs),
          batch.map((r) => r.requestId),
          batch.map((r) => r.analysisId),
          batch.map((r) => r.error),
        ],
      );
      this.opts.onWritten?.(batch.length);
    } catch (err) {
      this.opts.onDrop?.('db', batch.length, err);
    }
  }
}
