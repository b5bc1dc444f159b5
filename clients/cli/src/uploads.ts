import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { LenstackError, type LenstackErrorCode } from '@lenstack/client';
import * as tus from 'tus-js-client';
import type { BatchState, Refusal } from './batch-state.ts';
import { fileRanges, rangeHttpStack, type FileInput } from './upload-body.ts';

/** Photos uploaded at once: enough to fill a link with small photos, few descriptors and sockets. */
export const UPLOAD_CONCURRENCY = 4;
/**
 * tus-js-client's waits before it tries a failed request again (from the offset the API reports):
 * about a minute in all, and the count starts again whenever bytes got through.
 */
const RETRY_DELAYS = [500, 1000, 2000, 4000, 8000, 15000, 30000];

/** A photo to upload: the batch command's own record of it (no copy is made per upload). */
export interface UploadJob {
  readonly sha256: string;
  readonly path: string;
  readonly size: number;
  /** The photo's name; its last part goes in the API's Upload-Metadata (`filename`), which the API does not need. */
  readonly name: string;
}

export interface UploadProgress {
  /** Photos done (uploaded now or before, or refused). */
  photos: number;
  bytes: number;
  /** Bytes the API acknowledged this run (a resumed photo counts only what it still sent). */
  sentThisRun: number;
}

/** What the run did; each photo's outcome is in the state (uploaded, refused). */
export interface UploadOutcome {
  /** Bytes this run sent (and the API acknowledged), resumed photos counting only their remainder. */
  bytesSent: number;
  /** Photos whose upload this run began afresh, continued from an offset, or found already done. */
  started: number;
  resumed: number;
}

/**
 * Uploads every job's file with tus, a few at a time, sent from disk through one reused buffer per
 * upload (upload-body.ts: memory stays flat whatever the folder's size and number): with `withBody`
 * one POST per photo carrying its bytes under an id chosen here (creation-with-upload), else a
 * POST then a PATCH. Each upload's id is recorded in the state before its first byte goes, and
 * once it finished, so a run stopped anywhere continues with the next one: a finished photo is
 * not sent again, a half-sent one goes on from the API's offset (HEAD, then PATCH).
 *
 * Failures: tus-js-client retries network errors and 5xx with backoff from the last offset; a 429
 * (the account's request rate) stops every worker until the API's Retry-After passed, and a
 * nearly spent rate limit pauses them before it refuses anything. A file the API refuses (not an
 * image it takes, 422) is recorded as refused and the others go on. Anything else stops the run
 * (its state kept) with the API's error.
 */
export async function uploadAll(opts: {
  jobs: UploadJob[];
  state: BatchState;
  endpoint: string;
  apiKey: string;
  signal: AbortSignal;
  onProgress: (p: UploadProgress) => void;
  /** Photos whose upload id this run chose (chooseUploadIds) and never sent: created at once, no HEAD first. */
  fresh?: ReadonlySet<string>;
  /**
   * One request per photo (tus creation-with-upload): the id chosen here, the bytes in the POST.
   * Without it (a folder's photos), a POST then a PATCH, the API naming the upload.
   */
  withBody?: boolean;
}): Promise<UploadOutcome> {
  const { jobs, state } = opts;
  const total = { photos: 0, bytes: 0, sentThisRun: 0 };
  let resumed = 0;
  let started = 0;
  const pending: UploadJob[] = [];
  for (const job of jobs) {
    if (state.uploaded.has(job.sha256) || state.refused.has(job.sha256)) {
      total.photos++;
      total.bytes += job.size;
    } else pending.push(job);
  }
  opts.onProgress({ ...total });

  /** Until when every worker waits after a 429 or near the limit (shared: the limit is the account's). */
  let pausedUntil = 0;
  /** Photos whose id uploadOne chose itself (never sent before this run). */
  const chosenNow = new Set<string>();
  const withBody = opts.withBody === true;
  if (withBody) for (const job of pending) if (!state.begun.has(job.sha256)) chosenNow.add(job.sha256);
  /**
   * The uploads under way, each with what fails its promise: stopping the run aborts them and ends
   * their promises at once (tus-js-client calls nothing after an abort). Nothing else holds an
   * upload: once it ended, its tus-js-client instance, requests and closures are garbage.
   */
  const running = new Map<tus.Upload, (err: unknown) => void>();
  const onAbort = () => {
    for (const [u, fail] of running) {
      void u.abort(false);
      fail(opts.signal.reason);
    }
    running.clear();
  };
  opts.signal.addEventListener('abort', onAbort, { once: true });

  const uploadOne = (job: UploadJob) =>
    new Promise<void>((resolve, reject) => {
      // The id is ours to choose (the API takes Upload-Metadata uploadId) and is on disk before the
      // POST goes: a creation cut off mid-body resumes from HEAD like any other upload.
      const begun = state.begun.get(job.sha256) ?? (withBody ? chooseUploadIds(state, [job.sha256]).get(job.sha256) : undefined);
      const url = begun ? new URL(begun, `${opts.endpoint}/`).toString() : undefined;
      // An id an earlier run may have sent is asked about first (HEAD; a 404 creates it then).
      const sentBefore = url !== undefined && !(opts.fresh?.has(job.sha256) ?? false) && !chosenNow.has(job.sha256);
      if (sentBefore) resumed++;
      else started++;
      const input: FileInput = { path: job.path, size: job.size };
      const upload = new tus.Upload(input as never, {
        endpoint: opts.endpoint,
        ...(sentBefore ? { uploadUrl: url } : {}),
        uploadSize: job.size,
        uploadDataDuringCreation: withBody,
        metadata: { filename: basename(job.name), ...(withBody && begun ? { uploadId: begun } : {}) },
        headers: { authorization: `Bearer ${opts.apiKey}` },
        // The bytes go from the file through a reused buffer (upload-body.ts), not a stream of new ones.
        fileReader: fileRanges,
        httpStack: rangeHttpStack,
        retryDelays: RETRY_DELAYS,
        // The state file is where uploads are remembered, not tus-js-client's own URL storage.
        storeFingerprintForResuming: false,
        onShouldRetry: (err) => {
          const status = err.originalResponse?.getStatus() ?? 0;
          let again = status === 0 || status >= 500 || status === 409 || status === 423;
          if (status === 429 || status === 503) {
            const after = Number(err.originalResponse?.getHeader('retry-after'));
            pausedUntil = Math.max(pausedUntil, Date.now() + (Number.isFinite(after) && after > 0 ? after * 1000 : 2000));
            again = true;
          }
          // A creation that failed (cut mid-body, or refused before it read any): asked about
          // first next time, from the URL the chosen id gives, and resumed from what arrived.
          if (again && upload.url === null && withBody) upload.options.uploadUrl = url!;
          return again;
        },
        onBeforeRequest: async () => {
          const wait = pausedUntil - Date.now();
          if (wait > 0) await sleep(wait);
        },
        // Paced by the account's rate limit (RateLimit-Remaining, -Reset): a request refused 429
        // after its body went on the wire would send those bytes again.
        onAfterResponse: (_req, res) => {
          const remaining = Number(res.getHeader('ratelimit-remaining'));
          const reset = Number(res.getHeader('ratelimit-reset'));
          if (Number.isFinite(remaining) && Number.isFinite(reset) && remaining < RATE_RESERVE) {
            pausedUntil = Math.max(pausedUntil, Date.now() + Math.max(1, reset) * 1000);
          }
        },
        onUploadUrlAvailable: () => {
          // Synchronous: on disk before the first PATCH is sent. A resumed upload that the API no
          // longer knew was made again (under a new id, unless this run chose it).
          const id = upload.url ? idOf(upload.url) : null;
          if (id && id !== begun) state.record({ upload: { sha256: job.sha256, id } });
        },
        // One request with the bytes per photo (no chunkSize): what it carried, from the offset a resumed photo starts at.
        onChunkComplete: (chunk) => {
          total.sentThisRun += chunk;
        },
        onProgress: (sent) => {
          opts.onProgress({ photos: total.photos, bytes: total.bytes + sent, sentThisRun: total.sentThisRun });
        },
        onSuccess: () => {
          running.delete(upload);
          const id = idOf(upload.url!);
          state.record({ uploaded: { sha256: job.sha256, uploadId: id, at: Date.now() } });
          total.photos++;
          total.bytes += job.size;
          opts.onProgress({ ...total });
          resolve();
        },
        onError: (err) => {
          running.delete(upload);
          const refusal = refusalOf(err);
          if (refusal) {
            state.record({ refused: { sha256: job.sha256, ...refusal } });
            total.photos++;
            total.bytes += job.size;
            opts.onProgress({ ...total });
            resolve();
          } else reject(errorOf(err));
        },
      });
      running.set(upload, reject);
      upload.start();
    });

  let next = 0;
  let failure: unknown = null;
  // One abort listener for the whole run (onAbort), none per photo: not a race against a promise
  // that lives as long as the run, which would keep a reaction per photo until the run ends.
  const worker = async () => {
    while (next < pending.length && failure === null && !opts.signal.aborted) {
      const job = pending[next++]!;
      try {
        await uploadOne(job);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(UPLOAD_CONCURRENCY, pending.length) }, worker));
  } finally {
    opts.signal.removeEventListener('abort', onAbort);
    if (failure !== null) onAbort();
  }
  if (failure !== null) throw failure;
  if (opts.signal.aborted) throw opts.signal.reason;
  return { bytesSent: total.sentThisRun, started, resumed };
}

/**
 * Finished uploads recorded longer ago than `olderThanMs` that the API no longer holds (HEAD answers
 * 404: expired, or deleted): recorded as expired, so they are uploaded again. Four at a time.
 */
export async function dropExpired(opts: { state: BatchState; shas: string[]; endpoint: string; apiKey: string; olderThanMs: number }): Promise<number> {
  const { state } = opts;
  const old = opts.shas.filter((sha) => state.uploaded.has(sha) && Date.now() - (state.uploadedAt.get(sha) ?? 0) > opts.olderThanMs);
  let dropped = 0;
  let next = 0;
  const worker = async () => {
    while (next < old.length) {
      const sha = old[next++]!;
      const res = await fetch(`${opts.endpoint}/${state.uploaded.get(sha)}`, { method: 'HEAD', headers: { authorization: `Bearer ${opts.apiKey}`, 'tus-resumable': '1.0.0' } }).catch(() => null);
      // Anything but a clear 404 leaves it to the submission to say.
      if (res?.status === 404) {
        state.record({ expired: { sha256: sha } });
        dropped++;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(UPLOAD_CONCURRENCY, old.length) }, worker));
  return dropped;
}

const idOf = (url: string) => new URL(url).pathname.split('/').pop()!;

/**
 * Requests kept back from the account's rate limit while uploading: the batch's submission and
 * its event stream, and the other uploads in flight, still get through.
 */
const RATE_RESERVE = UPLOAD_CONCURRENCY + 4;

/**
 * An upload id for each photo that has none yet (`upl_` and 32 random hex digits, as the API makes
 * them), recorded in the state before anything is sent: the batch can name the upload, and a cut
 * creation can be asked about, before the API has answered it.
 */
export function chooseUploadIds(state: BatchState, shas: string[]): Map<string, string> {
  const chosen = new Map<string, string>();
  for (const sha256 of shas) {
    if (state.begun.has(sha256) || state.uploaded.has(sha256)) continue;
    const id = `upl_${randomBytes(16).toString('hex')}`;
    state.record({ upload: { sha256, id } });
    chosen.set(sha256, id);
  }
  return chosen;
}

/** The API's error envelope in a tus answer, if there is one. */
function envelopeOf(err: Error): { code: string; message: string; requestId?: string; retryable?: boolean } | null {
  const res = (err as tus.DetailedError).originalResponse;
  if (!res) return null;
  try {
    const body = JSON.parse(res.getBody()) as { error?: { code?: unknown; message?: unknown; requestId?: unknown } };
    if (typeof body.error?.code === 'string' && typeof body.error.message === 'string') {
      return { code: body.error.code, message: body.error.message, ...(typeof body.error.requestId === 'string' ? { requestId: body.error.requestId } : {}) };
    }
  } catch {
    // not the envelope
  }
  return null;
}

/** A refusal of the photo itself (its bytes are not an image the API takes): that photo fails, the rest go on. */
function refusalOf(err: Error): Refusal | null {
  const status = (err as tus.DetailedError).originalResponse?.getStatus();
  const envelope = envelopeOf(err);
  if (status === 422 && envelope && (envelope.code === 'IMAGE_INVALID' || envelope.code === 'IMAGE_TOO_LARGE')) return { code: envelope.code, message: envelope.message };
  return null;
}

/** Any other failure as the client's error, so the CLI's exit codes and messages apply (401 → 3, 413 → 5, no answer → 6). */
function errorOf(err: Error): LenstackError {
  const res = (err as tus.DetailedError).originalResponse;
  const envelope = envelopeOf(err);
  if (!res) {
    return new LenstackError({ code: 'NETWORK_ERROR', message: `uploading: ${err.message.split('\n')[0]}`, status: null, requestId: '', retryable: true, attempts: RETRY_DELAYS.length + 1 });
  }
  return new LenstackError({
    code: (envelope?.code ?? 'UNEXPECTED_RESPONSE') as LenstackErrorCode,
    message: envelope?.message ?? `the upload answered ${res.getStatus()}`,
    status: res.getStatus(),
    requestId: envelope?.requestId ?? res.getHeader('x-request-id') ?? '',
    retryable: false,
    attempts: 1,
  });
}
