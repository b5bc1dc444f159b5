import type { Db } from '../../db/pool.ts';
import { intIn, pick, rngFor } from '../../samples/random.ts';
import { tusUpload, type TusDoor, type TusStats } from './uploads.ts';

/**
 * The batch side of a chaos run: clients that upload photos with tus (POST /v1/uploads, then
 * PATCHes, resumed with HEAD on the other replica when a PATCH is lost) and submit photo and
 * vehicle batches naming them (`items: [{ uploadId }]`), then wait for the batch to end. What is
 * sent is decided by the seed; faults change only the answers.
 */

export interface PlannedBatch {
  index: number;
  /** Index among the run's batch users (their own accounts, funded for every photo). */
  user: number;
  kind: 'photos' | 'vehicles';
  /** Photos (indices into the plan's images); a vehicle batch groups them in vehicles of 1–2. */
  images: number[];
  lenses: string[];
  requestId: string;
}

const LENSES = ['dating', 'location', 'describe', 'people', 'atmosphere', 'composition'] as const;

export function planBatches(opts: { seed: string; runTag: string; batches: number; users: number; images: number }): PlannedBatch[] {
  const rng = rngFor(`${opts.seed}|batches`);
  const safe = opts.seed.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 40);
  return Array.from({ length: opts.batches }, (_, index) => {
    const kind = rng() < 0.3 ? 'vehicles' : 'photos';
    const n = intIn(rng, 2, 4);
    const images = Array.from({ length: n }, () => intIn(rng, 0, opts.images - 1));
    const lenses = [pick(rng, [...LENSES])];
    if (rng() < 0.4) {
      const second = pick(rng, [...LENSES]);
      if (second !== lenses[0]) lenses.push(second);
    }
    return { index, user: index % opts.users, kind, images, lenses, requestId: `chaos-batch-${safe}-${opts.runTag}-${index}` };
  });
}

/** The submission body over finished uploads. */
export function batchBody(b: Pick<PlannedBatch, 'kind' | 'lenses'>, uploadIds: string[]): Record<string, unknown> {
  if (b.kind === 'photos') return { items: uploadIds.map((uploadId, i) => ({ uploadId, name: `photo ${i + 1}` })), modules: b.lenses };
  const vehicles: Array<{ name: string; vehicle: Record<string, unknown>; items: Array<{ uploadId: string }> }> = [];
  for (let i = 0; i < uploadIds.length; i += 2) {
    vehicles.push({ name: `vehicle ${vehicles.length + 1}`, vehicle: { make: 'Volvo', model: '240', year: 1988 }, items: uploadIds.slice(i, i + 2).map((uploadId) => ({ uploadId })) });
  }
  return { vehicles };
}

export interface SubmitAttempt {
  from: number;
  to: number;
  status?: number;
  code?: string;
  retryAfter?: string | null;
  network?: string;
}

export interface BatchResult {
  job: PlannedBatch | { index: number; kind: 'photos' | 'vehicles'; label: string };
  /** Uploads finished, and the reason one was not. */
  uploads: number;
  uploadError?: string;
  attempts: SubmitAttempt[];
  /** 202 and the batch id, or the final refusal. */
  batchId?: string;
  refused?: string;
  /** The batch's status when the client stopped waiting (completed, cancelled; anything else is a failure). */
  status?: string;
  counts?: { total: number; done: number; failed: number; pending: number };
  creditsCharged?: number;
}

const FINAL = new Set(['completed', 'cancelled']);
/** Submissions of one batch at most; with retryForMs, they bound how long a client keeps trying. */
const MAX_SUBMITS = 60;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * POST the batch with its x-request-id, retrying lost answers, 429 and 5xx with the same id for
 * up to `retryForMs` (longer than the run's Temporal outage: a 503 with Retry-After says come back,
 * and a careful client does, however long the outage).
 */
export async function submitBatch(
  bases: () => string[],
  path: string,
  headers: Record<string, string>,
  body: Record<string, unknown>,
  requestId: string | undefined,
  start: number,
  retryForMs: number,
): Promise<{ attempts: SubmitAttempt[]; batchId?: string; refused?: string }> {
  const attempts: SubmitAttempt[] = [];
  const payload = JSON.stringify(body);
  const deadline = Date.now() + retryForMs;
  for (let n = 0; n < MAX_SUBMITS && Date.now() < deadline; n++) {
    const b = bases();
    const base = b[(start + n) % b.length]!;
    const a: SubmitAttempt = { from: Date.now(), to: 0 };
    attempts.push(a);
    let wait = 250 * 2 ** Math.min(n, 4);
    try {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', ...(requestId ? { 'x-request-id': requestId } : {}) },
        body: payload,
        signal: AbortSignal.timeout(60_000),
      });
      const text = await res.text();
      a.to = Date.now();
      a.status = res.status;
      let parsed: { id?: string; error?: { code?: string } } = {};
      try {
        parsed = JSON.parse(text) as typeof parsed;
      } catch {
        // judged by status
      }
      if (parsed.error?.code) a.code = parsed.error.code;
      if (res.status === 202 && parsed.id) return { attempts, batchId: parsed.id };
      if (res.status === 429 || res.status === 503) {
        a.retryAfter = res.headers.get('retry-after');
        const ra = Number(a.retryAfter);
        if (Number.isFinite(ra) && ra > 0) wait = Math.min(5_000, ra * 1000);
      } else if (res.status < 500) {
        return { attempts, refused: `${res.status} ${parsed.error?.code ?? text.slice(0, 200)}` };
      }
    } catch (err) {
      a.to = Date.now();
      const e = err as Error & { cause?: { code?: string; message?: string } };
      a.network = e.name === 'TimeoutError' ? 'client timeout' : (e.cause?.code ?? e.cause?.message ?? e.message);
    }
    await sleep(wait);
  }
  const last = attempts[attempts.length - 1];
  return { attempts, refused: `still ${last?.status ?? last?.network ?? 'no answer'} after ${attempts.length} attempts in ${Math.round(retryForMs / 1000)} s` };
}

/** Upload the job's photos through the API's door, submit the batch, wait (bounded) for its end. */
export async function runBatchJob(
  job: PlannedBatch,
  opts: { apis: () => string[]; key: string; images: Buffer[]; stats: TusStats; retryForMs: number; waitMs: number; stopWaiting: () => boolean },
): Promise<BatchResult> {
  const door: TusDoor = { bases: opts.apis, createPath: '/v1/uploads', headers: { authorization: `Bearer ${opts.key}` } };
  const ids: string[] = [];
  for (const [i, img] of job.images.entries()) {
    const up = await tusUpload(door, opts.images[img]!, { chunks: 2, start: job.index + i, stats: opts.stats });
    if ('error' in up) return { job, uploads: ids.length, uploadError: up.error, attempts: [] };
    ids.push(up.id);
  }
  const sent = await submitBatch(opts.apis, '/v1/batches', door.headers, batchBody(job, ids), job.requestId, job.index, opts.retryForMs);
  const result: BatchResult = { job, uploads: ids.length, attempts: sent.attempts, ...(sent.batchId ? { batchId: sent.batchId } : {}), ...(sent.refused ? { refused: sent.refused } : {}) };
  if (sent.batchId) await followBatch(result, opts.apis, door.headers, opts.waitMs, opts.stopWaiting);
  return result;
}

/** GET /v1/batches/:id until the batch ends (or `waitMs` passes); its last status in `result`. */
export async function followBatch(result: BatchResult, apis: () => string[], headers: Record<string, string>, waitMs: number, stopWaiting: () => boolean): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let n = 0; Date.now() < deadline && !stopWaiting(); n++) {
    const b = apis();
    try {
      const res = await fetch(`${b[n % b.length]}/v1/batches/${result.batchId}`, { headers, signal: AbortSignal.timeout(30_000) });
      if (res.status === 200) {
        const s = (await res.json()) as { status: string; counts: BatchResult['counts']; creditsCharged: number };
        result.status = s.status;
        result.counts = s.counts;
        result.creditsCharged = s.creditsCharged;
        if (FINAL.has(s.status)) return;
      } else {
        await res.arrayBuffer();
      }
    } catch {
      // the replica is down or restarting: ask again
    }
    await sleep(1_000);
  }
}

/**
 * The batch checks, from the database: every batch of the run's accounts ended (completed or
 * cancelled, no item pending), none left `starting`; and every batch a client was told was
 * accepted exists.
 */
export async function checkBatches(db: Db, accounts: string[], results: BatchResult[]): Promise<{ lines: string[]; failures: string[]; byStatus: Record<string, number>; items: Record<string, number> }> {
  const failures: string[] = [];
  const rows = await db.query<{ id: string; kind: string; status: string; pending: number; done: number; failed: number; credits: number }>(
    `SELECT b.id, b.kind, b.status, count(*) FILTER (WHERE i.status = 'pending')::int AS pending,
            count(*) FILTER (WHERE i.status = 'done')::int AS done, count(*) FILTER (WHERE i.status = 'failed')::int AS failed,
            coalesce(sum(i.credits), 0)::int AS credits
       FROM batches b LEFT JOIN batch_items i ON i.batch_id = b.id WHERE b.user_id = ANY($1) GROUP BY b.id`,
    [accounts],
  );
  const byStatus: Record<string, number> = {};
  const items: Record<string, number> = { done: 0, failed: 0, pending: 0 };
  for (const r of rows.rows) {
    byStatus[`${r.kind} ${r.status}`] = (byStatus[`${r.kind} ${r.status}`] ?? 0) + 1;
    items.done! += r.done;
    items.failed! += r.failed;
    items.pending! += r.pending;
  }
  const unfinished = rows.rows.filter((r) => !FINAL.has(r.status) || r.pending > 0);
  if (unfinished.length) failures.push(`${unfinished.length} batch(es) not ended: ${unfinished.slice(0, 5).map((r) => `${r.id} ${r.status} (${r.pending} pending)`).join('; ')}`);
  const known = new Set(rows.rows.map((r) => r.id));
  const lost = results.filter((r) => r.batchId && !known.has(r.batchId));
  if (lost.length) failures.push(`${lost.length} batch(es) answered 202 but not stored: ${lost.slice(0, 5).map((r) => r.batchId).join(', ')}`);
  const notUploaded = results.filter((r) => r.uploadError);
  if (notUploaded.length) failures.push(`${notUploaded.length} batch job(s) could not finish their uploads: ${notUploaded.slice(0, 5).map((r) => `#${r.job.index}: ${r.uploadError}`).join('; ')}`);
  const refused = results.filter((r) => r.refused);
  if (refused.length) failures.push(`${refused.length} batch submission(s) refused: ${refused.slice(0, 5).map((r) => `#${r.job.index}: ${r.refused}`).join('; ')}`);
  const fmt = (rec: Record<string, number>) => Object.entries(rec).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  return {
    lines: [`batches: ${rows.rows.length} stored → ${fmt(byStatus)}; items done ${items.done}, failed ${items.failed}, pending ${items.pending}; not ended ${unfinished.length}`],
    failures,
    byStatus,
    items,
  };
}
