/**
 * tus 1.0 as a careful chaos client speaks it (uploads/tus.ts serves it): create an upload, send
 * its bytes in PATCHes, and when a PATCH fails (the process died, the connection was reset, a 5xx)
 * ask any replica with HEAD where the upload stands and go on from that offset there. Both doors
 * use it: the API's (/v1/uploads, a Bearer key) and the console's (/api/v1/uploads, a session
 * cookie and Upload-Metadata `workspace`).
 */

export interface TusDoor {
  /** Base URLs of the replicas that serve the door. */
  bases: () => string[];
  /** Where uploads are created, e.g. /v1/uploads. */
  createPath: string;
  /** Authorization (Bearer key, or cookie and origin). */
  headers: Record<string, string>;
  /** The Upload-Metadata header, if the door needs one. */
  metadata?: string;
}

export interface TusStats {
  /** Requests made (POST, HEAD, PATCH). */
  requests: number;
  /** PATCHes that failed and were taken up again after a HEAD. */
  resumes: number;
  /** Creations that failed and were made again (on the next replica). */
  recreated: number;
  /** Answers by status or connection error. */
  byStatus: Record<string, number>;
  /** 503 answers without Retry-After (each a failure of the run: a caller must be told when to come back). */
  noRetryAfter: number;
}

export const emptyTusStats = (): TusStats => ({ requests: 0, resumes: 0, recreated: 0, byStatus: {}, noRetryAfter: 0 });

const TUS = { 'tus-resumable': '1.0.0' };
const TIMEOUT_MS = 60_000;
const MAX_STEPS = 30;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function count(stats: TusStats, key: string, res?: Response): void {
  stats.requests++;
  stats.byStatus[key] = (stats.byStatus[key] ?? 0) + 1;
  if (res?.status === 503 && !res.headers.get('retry-after')) stats.noRetryAfter++;
}

function failure(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'client timeout';
  return e.cause?.code ?? e.cause?.message ?? e.message;
}

function retryAfterMs(res: Response, fallback: number): number {
  const ra = Number(res.headers.get('retry-after'));
  return Number.isFinite(ra) && ra > 0 ? Math.min(5_000, ra * 1000) : fallback;
}

/** POST: a new upload of `length` bytes; its path (Location) or the refusal that is final. */
async function create(door: TusDoor, base: string, length: number, stats: TusStats): Promise<{ path: string } | { retry: number } | { refused: string }> {
  try {
    const res = await fetch(`${base}${door.createPath}`, {
      method: 'POST',
      headers: { ...door.headers, ...TUS, 'upload-length': String(length), ...(door.metadata ? { 'upload-metadata': door.metadata } : {}) },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await res.text();
    count(stats, String(res.status), res);
    if (res.status === 201) return { path: new URL(res.headers.get('location')!, base).pathname };
    if (res.status === 429 || res.status >= 500) return { retry: retryAfterMs(res, 500) };
    return { refused: `POST ${res.status}: ${text.slice(0, 200)}` };
  } catch (err) {
    count(stats, failure(err));
    return { retry: 500 };
  }
}

/** HEAD: the upload's offset on `base`, when to ask again (a 5xx, 409, 423, 429 or lost connection), or a final refusal. */
async function head(door: TusDoor, base: string, path: string, stats: TusStats): Promise<{ offset: number } | { retry: number } | { refused: string }> {
  try {
    const res = await fetch(`${base}${path}`, { method: 'HEAD', headers: { ...door.headers, ...TUS }, signal: AbortSignal.timeout(TIMEOUT_MS) });
    await res.arrayBuffer();
    count(stats, `HEAD ${res.status}`, res);
    const offset = res.headers.get('upload-offset');
    if (res.status === 200 && offset !== null) return { offset: Number(offset) };
    // 409/423: another request holds the upload for a moment; 429 and 5xx: asked to come back.
    if ([409, 423, 429].includes(res.status) || res.status >= 500) return { retry: retryAfterMs(res, 500) };
    return { refused: `HEAD ${res.status}` };
  } catch (err) {
    count(stats, `HEAD ${failure(err)}`);
    return { retry: 500 };
  }
}

/** HEAD: the upload's offset on `base`, or undefined when it could not say. */
export async function headOffset(door: TusDoor, base: string, path: string, stats: TusStats): Promise<number | undefined> {
  const at = await head(door, base, path, stats);
  return 'offset' in at ? at.offset : undefined;
}

/**
 * HEAD until `base` answers, waiting as each refusal says (Retry-After), at most `tries` times:
 * a careful client does not give up on an upload because one HEAD met a database fault.
 */
async function headOffsetPatiently(door: TusDoor, base: string, path: string, stats: TusStats, tries: number): Promise<number | undefined> {
  for (let n = 0; n < tries; n++) {
    const at = await head(door, base, path, stats);
    if ('offset' in at) return at.offset;
    if ('refused' in at) return undefined;
    if (n + 1 < tries) await sleep(at.retry);
  }
  return undefined;
}

/** PATCH bytes [from, to) of the upload: the new offset, or undefined when it failed. */
async function patch(door: TusDoor, base: string, path: string, bytes: Buffer, from: number, to: number, stats: TusStats): Promise<{ offset: number } | { retry: number } | { refused: string }> {
  try {
    const res = await fetch(`${base}${path}`, {
      method: 'PATCH',
      headers: { ...door.headers, ...TUS, 'upload-offset': String(from), 'content-type': 'application/offset+octet-stream' },
      body: bytes.subarray(from, to),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await res.text();
    count(stats, `PATCH ${res.status}`, res);
    if (res.status === 204) return { offset: Number(res.headers.get('upload-offset')) };
    // 409: the offset moved (a PATCH we thought lost had landed): HEAD says where.
    if (res.status === 409 || res.status === 429 || res.status >= 500) return { retry: retryAfterMs(res, 300) };
    return { refused: `PATCH ${res.status}: ${text.slice(0, 200)}` };
  } catch (err) {
    count(stats, `PATCH ${failure(err)}`);
    return { retry: 300 };
  }
}

/**
 * Upload `bytes` through `door` in `chunks` PATCHes, moving to the next replica after each failed
 * request and resuming from the offset a HEAD reports. Returns the upload id, or the reason it
 * could not (a refusal, or MAX_STEPS requests without finishing).
 */
export async function tusUpload(door: TusDoor, bytes: Buffer, opts: { chunks: number; start: number; stats: TusStats }): Promise<{ id: string } | { error: string }> {
  const { stats } = opts;
  let turn = opts.start;
  const base = () => {
    const b = door.bases();
    return b[turn % b.length]!;
  };
  let path: string | undefined;
  let offset = 0;
  const step = Math.ceil(bytes.length / opts.chunks);
  for (let n = 0; n < MAX_STEPS; n++) {
    if (path === undefined) {
      const made = await create(door, base(), bytes.length, stats);
      if ('refused' in made) return { error: made.refused };
      if ('retry' in made) {
        turn++;
        stats.recreated++;
        await sleep(made.retry);
        continue;
      }
      path = made.path;
      continue;
    }
    const sent = await patch(door, base(), path, bytes, offset, Math.min(bytes.length, offset + step), stats);
    if ('refused' in sent) return { error: sent.refused };
    if ('offset' in sent) {
      offset = sent.offset;
      if (offset >= bytes.length) return { id: path.split('/').pop()! };
      continue;
    }
    // Lost: where does the upload stand? Asked of the next replica (this one may be gone).
    turn++;
    stats.resumes++;
    await sleep(sent.retry);
    const at = await headOffset(door, base(), path, stats);
    if (at !== undefined) {
      offset = at;
      if (offset >= bytes.length) return { id: path.split('/').pop()! };
    }
  }
  return { error: `not finished after ${MAX_STEPS} requests (offset ${offset} of ${bytes.length})` };
}

/**
 * An upload cut by a SIGKILL: created on `victim`, half its bytes sent in one PATCH, then a PATCH
 * of the rest whose body stays open after its first bytes. Once the other replica's HEAD sees
 * those bytes arrive, `kill` takes the victim down with the PATCH in flight; the upload is then
 * finished through the other replica from the offset its HEAD reports.
 */
export async function interruptedUpload(
  door: TusDoor,
  victim: string,
  other: string,
  bytes: Buffer,
  kill: () => Promise<void>,
  stats: TusStats,
): Promise<{ id: string; offsetAtKill: number; finishedOn: string } | { error: string }> {
  // The creation and the first half on the victim, retried there (its database connections are
  // being reset too) a few times before giving up.
  let made: Awaited<ReturnType<typeof create>> = { retry: 0 };
  for (let n = 0; n < 8 && 'retry' in made; n++) {
    if (n) await sleep(made.retry);
    made = await create(door, victim, bytes.length, stats);
  }
  if (!('path' in made)) return { error: `create on the replica to kill: ${'refused' in made ? made.refused : 'failed 8 times'}` };
  const path = made.path;
  const half = Math.floor(bytes.length / 2);
  let first: Awaited<ReturnType<typeof patch>> = { retry: 0 };
  let from = 0;
  for (let n = 0; n < 8 && 'retry' in first; n++) {
    if (n) {
      await sleep(first.retry);
      // A lost PATCH may have landed, in part or whole: go on from where the upload stands.
      from = (await headOffset(door, victim, path, stats)) ?? from;
      if (from >= half) {
        first = { offset: from };
        break;
      }
    }
    first = await patch(door, victim, path, bytes, from, half, stats);
  }
  if (!('offset' in first)) return { error: `first half on the replica to kill: ${'refused' in first ? first.refused : 'failed 8 times'}` };
  // The rest: some bytes now, the others never (the process dies first).
  const more = Math.floor((bytes.length - half) / 2);
  let close: () => void = () => {};
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array(bytes.subarray(half, half + more)));
      close = () => {
        try {
          controller.error(new Error('abandoned'));
        } catch {
          // already closed
        }
      };
    },
  });
  const open = fetch(`${victim}${path}`, {
    method: 'PATCH',
    headers: { ...door.headers, ...TUS, 'upload-offset': String(half), 'content-type': 'application/offset+octet-stream' },
    body,
    duplex: 'half',
    signal: AbortSignal.timeout(TIMEOUT_MS),
  } as RequestInit).then(
    (res) => `PATCH ${res.status}`,
    (err: unknown) => `PATCH ${failure(err)}`,
  );
  // The open PATCH's bytes reach the datastore (seen from the other replica) before the kill.
  let seen: number | undefined;
  for (let i = 0; i < 200; i++) {
    seen = await headOffset(door, other, path, stats);
    if (seen !== undefined && seen > half) break;
    await sleep(50);
  }
  await kill();
  const cut = await open;
  count(stats, cut);
  close();
  const offsetAtKill = (await headOffsetPatiently(door, other, path, stats, 8)) ?? -1;
  if (offsetAtKill < 0) return { error: 'HEAD on the other replica after the kill gave no offset (refused, or no answer in 8 tries)' };
  stats.resumes++;
  let offset = offsetAtKill;
  for (let n = 0; n < 10 && offset < bytes.length; n++) {
    const sent = await patch(door, other, path, bytes, offset, bytes.length, stats);
    if ('refused' in sent) return { error: sent.refused };
    if ('offset' in sent) offset = sent.offset;
    else {
      await sleep(sent.retry);
      offset = (await headOffset(door, other, path, stats)) ?? offset;
    }
  }
  if (offset < bytes.length) return { error: `not finished on the other replica (offset ${offset} of ${bytes.length})` };
  return { id: path.split('/').pop()!, offsetAtKill, finishedOn: other };
}
