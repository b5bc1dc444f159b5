import { clear, createStore, del, delMany, entries, get, set, type UseStore } from 'idb-keyval';
import type { PreviousUpload, UrlStorage } from 'tus-js-client';

/**
 * Where the console keeps each file's upload URL (tus-js-client's `urlStorage`), so that a page
 * reloaded mid-fleet neither sends a finished photo again nor starts a cut one from zero
 * (docs/decisions.md, "A console fleet after a reload").
 *
 * IndexedDB, not tus-js-client's default localStorage: a 10,000-photo fleet's entries would fill
 * localStorage's few megabytes, and past that tus-js-client fails the file after its upload was
 * made. One small entry per file (its URL, its size and when it was kept), keyed by the file's
 * fingerprint (`fingerprints`). Nothing here ever fails an upload: without IndexedDB (a private
 * window may refuse it), or when it errs, the file is simply not resumable, as a fresh page is.
 * idb-keyval (Jake Archibald's) rather than hand-written IndexedDB calls: its four requests
 * (open, get, set, delete) are all this needs, promise-based, in 600 bytes.
 */

/**
 * How long an entry is kept: longer than an unused upload lives on the server (UPLOAD_TTL_MS, a day
 * by default), after which its HEAD answers 404 and tus-js-client drops it and starts afresh.
 */
const KEEP_MS = 7 * 24 * 3600_000;

interface Kept {
  url: string | null;
  size: number | null;
  keptAt: number;
}

let store: UseStore | null | undefined;
function db(): UseStore | null {
  if (store === undefined) {
    try {
      store = typeof indexedDB === 'undefined' ? null : createStore('lenstack-uploads', 'urls');
    } catch {
      store = null;
    }
  }
  return store;
}

const previous = (fingerprint: string, kept: Kept): PreviousUpload => ({
  size: kept.size,
  metadata: {},
  creationTime: new Date(kept.keptAt).toString(),
  urlStorageKey: fingerprint,
  uploadUrl: kept.url,
  parallelUploadUrls: null,
});

/**
 * Every request to IndexedDB sits on a file's way to its upload (looked up before it starts, kept
 * before its first bytes): one that never answers (a stuck database) must not stall the fleet, so
 * after WAIT_MS it counts as answered with nothing, and the page stops asking for its life.
 */
const WAIT_MS = 3_000;
function within<T>(request: () => Promise<T>, fallback: T): Promise<T> {
  return new Promise<T>((resolve) => {
    const timer = setTimeout(() => {
      store = null;
      resolve(fallback);
    }, WAIT_MS);
    request().then(
      (value) => resolve(value),
      () => resolve(fallback),
    ).finally(() => clearTimeout(timer));
  });
}

const fresh = (kept: Kept | undefined): kept is Kept => kept !== undefined && typeof kept.keptAt === 'number' && Date.now() - kept.keptAt < KEEP_MS;

export const uploadUrls: UrlStorage = {
  async findAllUploads() {
    const s = db();
    if (!s) return [];
    const all = await within(() => entries<string, Kept>(s), []);
    return all.filter(([, kept]) => fresh(kept)).map(([fp, kept]) => previous(fp, kept));
  },
  async findUploadsByFingerprint(fingerprint) {
    const s = db();
    if (!s) return [];
    const kept = await within(() => get<Kept>(fingerprint, s), undefined);
    return fresh(kept) ? [previous(fingerprint, kept)] : [];
  },
  async removeUpload(urlStorageKey) {
    const s = db();
    if (s) await within(() => del(urlStorageKey, s), undefined);
  },
  async addUpload(fingerprint, upload) {
    const s = db();
    if (s) await within(() => set(fingerprint, { url: upload.uploadUrl, size: upload.size, keptAt: Date.now() } satisfies Kept, s), undefined);
    return fingerprint;
  },
};

/** Forget the files a batch has taken: their uploads are the batch's now (and deleted as uploads). */
export async function forgetUploads(fingerprints: string[]): Promise<void> {
  const s = db();
  if (s && fingerprints.length) await within(() => delMany(fingerprints, s), undefined);
}

/**
 * Forget every kept upload (sign-out): nothing of the person, their workspaces or their folders'
 * paths stays in the browser for whoever uses it next.
 */
export async function forgetAllUploads(): Promise<void> {
  const s = db();
  if (s) await within(() => clear(s), undefined);
}

/** Drop the entries older than KEEP_MS (a fleet chosen once and never submitted), once per page. */
let swept = false;
export async function sweepUploads(): Promise<void> {
  const s = db();
  if (!s || swept) return;
  swept = true;
  const old = (await within(() => entries<string, Kept>(s), [])).filter(([, kept]) => !fresh(kept)).map(([fp]) => fp);
  if (old.length) await within(() => delMany(old, s), undefined);
}

/**
 * Each file's fingerprint in one selection: the workspace (a file resumes only into the workspace
 * it was sent to), the name the batch gives it (its path in a chosen or dropped folder), its type,
 * size and modification time. Two files alike in all of that (the same photo copied under two
 * folders whose paths the browser did not give) are told apart by their order in the selection,
 * so no two files of one selection ever share an upload.
 */
export function fingerprints(workspaceId: string, files: Array<{ file: File; name: string }>): string[] {
  const seen = new Map<string, number>();
  return files.map(({ file, name }) => {
    const base = ['lenstack', workspaceId, name, file.type, file.size, file.lastModified].join('\u0000');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return n === 0 ? base : `${base}\u0000${n}`;
  });
}
