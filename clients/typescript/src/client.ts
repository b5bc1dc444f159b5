import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/lenstack.ts';
import { isErrorEnvelope, LenstackError } from './errors.ts';
import { abortableSleep, backoff, checkRequestId, NetworkFailure, newRequestId, parseRetryAfter, retryingFetch, REQUEST_ID_HEADER, type AttemptInfo, type FetchPolicy, type RetryEvent, type RetryOptions, type Sleep } from './retry.ts';
import { readServerSentEvents } from './sse.ts';
import type {
  Analysis, AnalyzeRequest, AnalyzeV2Request, Batch, BatchItem, BatchItemsPage, BatchItemsQuery, BatchRequest, Catalog,
  CreditBalance, Discovery, EnrichRequest, Enrichment, ErasedPhoto, ExportFormat, Health, Lookup, LookupQuery, LookupRequest,
} from './types.ts';

export const DEFAULT_BASE_URL = 'http://localhost:8080';

export interface LenstackOptions {
  /** `svc_live_…` or `svc_test_…`. Without one, only health, llms.txt and discovery answer. */
  apiKey?: string | undefined;
  /** Where the API is (default http://localhost:8080). */
  baseUrl?: string | undefined;
  retry?: RetryOptions;
  /** Called before each retry (logging, metrics, tests). */
  onRetry?: (event: RetryEvent) => void;
  /** Another fetch (a proxy agent, a test double at the wire). */
  fetch?: (request: Request) => Promise<Response>;
  /** How the client waits between attempts (default: a timer that the request's signal aborts); tests pass one that records the wait. */
  sleep?: Sleep;
}

export interface RequestOptions {
  /**
   * The x-request-id to send (`^[A-Za-z0-9._:-]{1,128}$`; anything else throws a TypeError before
   * sending, as the API would replace it); one is made when absent. The same id is
   * sent on every retry, and sending it again later is the same request: analyze and enrich run
   * and bill once per id, and another body under a used id is 409 `REQUEST_ID_CONFLICT`.
   */
  requestId?: string;
  signal?: AbortSignal;
}

/**
 * Requests whose answer may be lost without harm when sent again: reads, lookups (free, nothing
 * stored) and the operations the API makes idempotent by x-request-id (analyze, enrich, batch
 * submission: the same id answers with the batch it made). Batch control (pause, resume, cancel,
 * retry an item) is not: after a lost answer the client reports NETWORK_ERROR rather than steer
 * the batch twice, and it resends them after a 429 or 503 only when the answer carries the API's
 * error envelope (the API refused before doing anything; a gateway's bare 503 promises nothing).
 */
const IDEMPOTENT: FetchPolicy = { idempotent: true };
const ONCE: FetchPolicy = { idempotent: false };

type FetchFn = (request: Request) => Promise<Response>;
type Outcome<T> = { data?: T; error?: unknown; response: Response };

/** The Lenstack API. Each method is one operation of openapi/lenstack.json; failures throw LenstackError. */
export class Lenstack {
  /** The openapi-fetch client underneath, typed by path and method, for anything not wrapped here. */
  readonly raw: Client<paths>;
  readonly baseUrl: string;
  readonly batches: Batches;
  readonly #retry: Required<RetryOptions>;
  readonly #onRetry: ((e: RetryEvent) => void) | undefined;
  readonly #fetch: FetchFn;
  readonly #sleep: Sleep;

  constructor(options: LenstackOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    this.#retry = { maxAttempts: 3, baseDelayMs: 500, maxDelayMs: 8000, maxRetryAfterMs: 60_000, ...options.retry };
    if (!(this.#retry.maxAttempts >= 1)) throw new RangeError('retry.maxAttempts must be at least 1');
    this.#onRetry = options.onRetry;
    this.#fetch = options.fetch ?? ((request) => globalThis.fetch(request));
    this.#sleep = options.sleep ?? abortableSleep;
    this.raw = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
    });
    this.batches = new Batches(this);
  }

  /** Attempts per request (retry.maxAttempts). */
  get maxAttempts(): number {
    return this.#retry.maxAttempts;
  }

  /**
   * Waits the jittered backoff before try `attempt + 1` (bounded by retry.maxDelayMs).
   * @internal `batches.wait` uses it between event streams.
   */
  backoff(attempt: number, signal?: AbortSignal): Promise<void> {
    return this.#sleep(backoff(attempt, this.#retry), signal);
  }

  /**
   * Runs one operation through the retrying fetch and turns an error answer into LenstackError.
   * @internal the methods below and `batches` use it; callers use them or `raw`.
   */
  async call<T>(policy: FetchPolicy, opts: RequestOptions | undefined, run: (init: { fetch: FetchFn; headers: Record<string, string>; signal?: AbortSignal }) => Promise<Outcome<T>>): Promise<T> {
    checkRequestId(opts?.requestId);
    const info: AttemptInfo = { attempts: 0, requestId: opts?.requestId ?? '' };
    const fetch = retryingFetch(this.#fetch, this.#retry, policy, this.#onRetry, this.#sleep, info);
    let outcome: Outcome<T>;
    try {
      outcome = await run({ fetch, headers: opts?.requestId ? { [REQUEST_ID_HEADER]: opts.requestId } : {}, ...(opts?.signal ? { signal: opts.signal } : {}) });
    } catch (err) {
      if (err instanceof NetworkFailure) {
        throw new LenstackError({ code: 'NETWORK_ERROR', message: err.message, status: null, requestId: err.requestId, retryable: true, attempts: err.attempts, cause: err.cause });
      }
      throw err;
    }
    const { response } = outcome;
    if (response.ok) return outcome.data as T;
    const requestId = response.headers.get(REQUEST_ID_HEADER) ?? info.requestId;
    const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'));
    const body = outcome.error;
    if (isErrorEnvelope(body)) {
      const e = body.error;
      throw new LenstackError({
        code: e.code, message: e.message, status: response.status, requestId: e.requestId ?? requestId,
        retryable: e.retryable, credits: e.credits, retryAfterSeconds, attempts: info.attempts,
      });
    }
    const text = typeof body === 'string' ? body.slice(0, 200) : '';
    throw new LenstackError({
      code: 'UNEXPECTED_RESPONSE', message: `HTTP ${response.status} without the API's error envelope${text ? `: ${text}` : ''}`,
      status: response.status, requestId, retryable: response.status >= 500, retryAfterSeconds, attempts: info.attempts,
    });
  }

  /** POST /v1/analyze: run lenses on a photo (or up to 50). Lenses the photo already has bill 0. */
  analyze(body: AnalyzeRequest, opts?: RequestOptions): Promise<Analysis> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.POST('/v1/analyze', { body, ...init }));
  }

  /** POST /v2/analyze: analyze plus bespoke extraction (`extract`, 5 credits per call). */
  analyzeV2(body: AnalyzeV2Request, opts?: RequestOptions): Promise<Analysis> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.POST('/v2/analyze', { body, ...init }));
  }

  /** POST /v2/lookup: earlier results of these images, free. */
  lookup(body: LookupRequest, opts?: RequestOptions): Promise<Lookup> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.POST('/v2/lookup', { body, ...init }));
  }

  /** GET /v2/lookup: earlier results by `sha256`, or by `pHash` within `threshold`, free. */
  lookupByFingerprint(query: LookupQuery, opts?: RequestOptions): Promise<Lookup> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.GET('/v2/lookup', { params: { query }, ...init }));
  }

  /** POST /v2/enrich: the photo with its cached lens output written into EXIF/IPTC/XMP (5 credits). */
  enrich(body: EnrichRequest, opts?: RequestOptions): Promise<Enrichment> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.POST('/v2/enrich', { body, ...init }));
  }

  /**
   * DELETE /v1/photos/{sha256}: erase a photo from the account's registry (its lens records, and
   * its bytes once nothing else keeps them). Sent once: after a lost answer, a resend would answer
   * 404 `PHOTO_NOT_IN_REGISTRY` for a photo this call erased, so the client reports NETWORK_ERROR
   * instead; a 404 after a NETWORK_ERROR means the photo is gone.
   */
  deletePhoto(sha256: string, opts?: RequestOptions): Promise<ErasedPhoto> {
    return this.call(ONCE, opts, (init) => this.raw.DELETE('/v1/photos/{sha256}', { params: { path: { sha256 } }, ...init }));
  }

  /** GET /v1/modules: every lens (`modules`) and stack (`presets`). */
  catalog(opts?: RequestOptions): Promise<Catalog> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.GET('/v1/modules', init));
  }

  /** GET /v1/usage: the credit balance of the key's account. */
  usage(opts?: RequestOptions): Promise<CreditBalance> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.GET('/v1/usage', init));
  }

  /** GET /v1/health (no key needed). */
  health(opts?: RequestOptions): Promise<Health> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.GET('/v1/health', init));
  }

  /** GET /v1/llms.txt: the plain-text description for AI agents (no key needed). */
  llmsTxt(opts?: RequestOptions): Promise<string> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.GET('/v1/llms.txt', { ...init, parseAs: 'text' }));
  }

  /** GET /.well-known/lenstack.json: the discovery index (no key needed). */
  discovery(opts?: RequestOptions): Promise<Discovery> {
    return this.call(IDEMPOTENT, opts, (init) => this.raw.GET('/.well-known/lenstack.json', init) as Promise<Outcome<Discovery>>);
  }
}

/** `client.batches`: up to 10,000 photos in the background (POST /v1/batches and its sub-resources). */
export class Batches {
  constructor(readonly client: Lenstack) {}

  /**
   * POST /v1/batches: submit; answers at once with the running batch. Resent after a lost answer
   * under the same x-request-id, which answers with the batch the first send made.
   */
  create(body: BatchRequest, opts?: RequestOptions): Promise<Batch> {
    return this.client.call(IDEMPOTENT, opts, (init) => this.client.raw.POST('/v1/batches', { body, ...init }));
  }

  /** GET /v1/batches/{id}: status, counts, credits and ETA. */
  get(batchId: string, opts?: RequestOptions): Promise<Batch> {
    return this.client.call(IDEMPOTENT, opts, (init) => this.client.raw.GET('/v1/batches/{batchId}', { params: { path: { batchId } }, ...init }));
  }

  /** GET /v1/batches/{id}/items: one page of photos and their results, in submission order. */
  items(batchId: string, query: BatchItemsQuery = {}, opts?: RequestOptions): Promise<BatchItemsPage> {
    return this.client.call(IDEMPOTENT, opts, (init) => this.client.raw.GET('/v1/batches/{batchId}/items', { params: { path: { batchId }, query }, ...init }));
  }

  /** Every item, page after page. */
  async *allItems(batchId: string, opts?: { pageSize?: number; signal?: AbortSignal }): AsyncGenerator<BatchItem> {
    let after = -1;
    for (;;) {
      const page = await this.items(batchId, { after, limit: opts?.pageSize ?? 100 }, opts?.signal ? { signal: opts.signal } : undefined);
      yield* page.items;
      if (page.nextAfter === null) return;
      after = page.nextAfter;
    }
  }

  /** POST /v1/batches/{id}/pause: running photos finish, the rest wait. */
  pause(batchId: string, opts?: RequestOptions): Promise<Batch> {
    return this.client.call(ONCE, opts, (init) => this.client.raw.POST('/v1/batches/{batchId}/pause', { params: { path: { batchId } }, ...init }));
  }

  /** POST /v1/batches/{id}/resume: also after a pause for credits, once credits were bought. */
  resume(batchId: string, opts?: RequestOptions): Promise<Batch> {
    return this.client.call(ONCE, opts, (init) => this.client.raw.POST('/v1/batches/{batchId}/resume', { params: { path: { batchId } }, ...init }));
  }

  /** POST /v1/batches/{id}/cancel: photos in flight finish and are billed; the rest fail with `BATCH_FINISHED` and are never run. */
  cancel(batchId: string, opts?: RequestOptions): Promise<Batch> {
    return this.client.call(ONCE, opts, (init) => this.client.raw.POST('/v1/batches/{batchId}/cancel', { params: { path: { batchId } }, ...init }));
  }

  /** POST /v1/batches/{id}/items/{index}/retry: run a failed photo again. */
  retryItem(batchId: string, index: number, opts?: RequestOptions): Promise<Batch> {
    return this.client.call(ONCE, opts, (init) => this.client.raw.POST('/v1/batches/{batchId}/items/{index}/retry', { params: { path: { batchId, index } }, ...init }));
  }

  /** GET /v1/batches/{id}/export: the batch as a spreadsheet (xlsx, csv) or JSON, as bytes. */
  async export(batchId: string, format: ExportFormat, opts?: RequestOptions): Promise<Uint8Array> {
    const bytes = await this.client.call<ArrayBuffer>(IDEMPOTENT, opts, (init) =>
      this.client.raw.GET('/v1/batches/{batchId}/export', { params: { path: { batchId }, query: { format } }, parseAs: 'arrayBuffer', ...init }) as Promise<Outcome<ArrayBuffer>>,
    );
    return new Uint8Array(bytes);
  }

  /**
   * GET /v1/batches/{id}/export as a stream, for exports too large to hold at once (a batch of
   * 10,000 photos): the answer's status is checked, and retried, before any byte is read; a body
   * that breaks off midway errors the stream, and the caller starts the download again.
   */
  async exportStream(batchId: string, format: ExportFormat, opts?: RequestOptions): Promise<ReadableStream<Uint8Array>> {
    const stream = await this.client.call<ReadableStream<Uint8Array> | null>(IDEMPOTENT, opts, (init) =>
      this.client.raw.GET('/v1/batches/{batchId}/export', { params: { path: { batchId }, query: { format } }, parseAs: 'stream', ...init }) as Promise<Outcome<ReadableStream<Uint8Array> | null>>,
    );
    return stream ?? new ReadableStream({ start: (controller) => controller.close() });
  }

  /**
   * GET /v1/batches/{id}/events: the batch each time it changes, as server-sent events; ends
   * when the batch completes, is cancelled or pauses (the server's closing `end` event is skipped). A connection lost mid-stream throws NETWORK_ERROR.
   */
  async *events(batchId: string, opts?: RequestOptions): AsyncGenerator<Batch> {
    checkRequestId(opts?.requestId);
    const requestId = opts?.requestId ?? newRequestId();
    const stream = await this.client.call<ReadableStream<Uint8Array> | null>(IDEMPOTENT, { ...opts, requestId }, (init) =>
      this.client.raw.GET('/v1/batches/{batchId}/events', { params: { path: { batchId } }, parseAs: 'stream', ...init }) as Promise<Outcome<ReadableStream<Uint8Array> | null>>,
    );
    if (!stream) return;
    const events = readServerSentEvents(stream);
    try {
      for (;;) {
        let next: IteratorResult<{ event: string; data: string }>;
        try {
          next = await events.next();
        } catch (err) {
          if (opts?.signal?.aborted) throw err;
          throw new LenstackError({ code: 'NETWORK_ERROR', message: `The batch event stream broke off: ${(err as Error).message}`, status: null, requestId, retryable: true, attempts: 1, cause: err });
        }
        if (next.done) return;
        if (next.value.event === 'batch') yield JSON.parse(next.value.data) as Batch;
      }
    } finally {
      // A caller that stops early closes the connection.
      await events.return(undefined);
    }
  }

  /**
   * Follows the batch until it completes, is cancelled or pauses (for credits, or by request),
   * reporting each change. A stream that breaks off, or ends while the batch still runs (the
   * server ends it when it cannot read the batch), is opened again after a jittered backoff; after
   * the client's maxAttempts streams in a row that brought no new counts it throws NETWORK_ERROR.
   * The end state is read once more with GET.
   */
  async wait(batchId: string, opts?: { onProgress?: (batch: Batch) => void; signal?: AbortSignal }): Promise<Batch> {
    const signal = opts?.signal ? { signal: opts.signal } : undefined;
    let latest: Batch | undefined;
    let failures = 0;
    for (;;) {
      let broke: unknown;
      try {
        for await (const batch of this.events(batchId, signal)) {
          // Every stream starts with the batch as it is: only a change is news (and resets the count
          // of fruitless streams), else a stream that drops after its first event reconnects forever.
          if (latest === undefined || progressOf(latest) !== progressOf(batch)) {
            failures = 0;
            opts?.onProgress?.(batch);
          }
          latest = batch;
          if (batch.status === 'paused') return batch;
        }
        if (latest !== undefined && ENDED.has(latest.status)) break;
        broke = new LenstackError({
          code: 'NETWORK_ERROR', message: `The batch event stream ended while the batch was still ${latest?.status ?? 'unseen'}`,
          status: null, requestId: '', retryable: true, attempts: failures + 1,
        });
      } catch (err) {
        if (!(err instanceof LenstackError) || err.code !== 'NETWORK_ERROR') throw err;
        broke = err;
      }
      if (++failures >= this.client.maxAttempts) throw broke;
      await this.client.backoff(failures, opts?.signal);
    }
    const final = await this.get(batchId, signal);
    if (progressOf(latest!) !== progressOf(final)) opts?.onProgress?.(final);
    return final;
  }
}

/** The statuses after which a batch changes no more (a paused one may be resumed). */
const ENDED = new Set<Batch['status']>(['completed', 'cancelled']);
const progressOf = (b: Batch) => JSON.stringify([b.status, b.counts]);
