import { appendFileSync, closeSync, openSync, readSync } from 'node:fs';
import { CliError, EXIT } from './exit-codes.ts';

/**
 * What `lenstack batch` remembers between runs of the same command (docs/decisions.md, "The CLI
 * takes a fleet"): a journal of JSON lines, appended one small synchronous write per event, so a
 * run stopped anywhere — Ctrl-C, a lost connection, SIGKILL, a power cut after the last write
 * reached the disk — leaves every event before it, and at worst a torn last line, which is
 * ignored. A journal rather than one JSON document rewritten: 10,000 photos would rewrite a few
 * MB 20,000 times.
 *
 * Lines, each one object with one key:
 * - `hash`: a file's SHA-256 with the size and mtime it had (a rerun does not read 10 GB again);
 * - `upload`: the id of a photo's upload, written before its first byte is sent (a rerun resumes
 *   it from the offset the API reports, at the API the rerun is given: the id, not the URL, is kept);
 * - `uploaded`: the upload id of a photo whose upload finished, and when (ms since the epoch);
 * - `expired`: a finished upload the API no longer holds (unused past its expiry): sent again;
 * - `refused`: the API's refusal of a photo's bytes (not an image we take);
 * - `submit`: the request id a batch is (about to be) submitted under, for a plan (the hash of
 *   what the batch holds): a resend under it answers the batch the first send made;
 * - `batch`: the batch that plan made.
 */
export interface HashRecord { path: string; size: number; mtimeMs: number; sha256: string }
export interface Refusal { code: string; message: string }

type Line =
  | { hash: HashRecord }
  | { upload: { sha256: string; id: string } }
  | { uploaded: { sha256: string; uploadId: string; at?: number } }
  | { expired: { sha256: string } }
  | { refused: { sha256: string } & Refusal }
  | { submit: { plan: string; requestId: string } }
  | { batch: { plan: string; id: string } };

export const DEFAULT_STATE_NAME = '.lenstack-batch.json';
const KIND = 'batch-state';

export class BatchState {
  readonly hashes = new Map<string, HashRecord>();
  /** sha256 → id of an upload begun (its tus URL is UPLOADS_PATH/id at the API of the run). */
  readonly begun = new Map<string, string>();
  /** sha256 → upload id of a finished upload. */
  readonly uploaded = new Map<string, string>();
  /** sha256 → when its upload finished (ms since the epoch). */
  readonly uploadedAt = new Map<string, number>();
  readonly refused = new Map<string, Refusal>();
  /** plan → request id; plan → batch id. */
  readonly submits = new Map<string, string>();
  readonly batches = new Map<string, string>();

  private constructor(readonly path: string) {}

  /**
   * Reads the journal at `path` (none yet is an empty state) and makes sure it can be appended to,
   * before anything is uploaded: a state that cannot be kept is found now.
   */
  static open(path: string, owner: { key: string }): BatchState {
    const header = { lenstack: KIND, version: 1, ...owner };
    const state = new BatchState(path);
    let fd: number | undefined;
    try {
      fd = openSync(path, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new CliError(`cannot read the state file ${path}: ${(err as Error).message}`, EXIT.USAGE);
    }
    let read = { empty: true, endsWithNewline: true };
    if (fd !== undefined) {
      let first = true;
      try {
        read = readLines(fd, (raw) => {
          if (first) {
            first = false;
            let found: { lenstack?: unknown; key?: unknown } | null;
            try {
              found = JSON.parse(raw) as typeof found;
            } catch {
              found = null;
            }
            if (found?.lenstack !== KIND) throw new CliError(`${path} is not a lenstack batch state file; name another with --state`, EXIT.USAGE);
            // Its uploads and batches are another key's (another account's, or another deployment's): they
            // would answer 404 here. Not the API's address: the same API is reached by many (a proxy, a host name).
            if (found.key !== owner.key) {
              throw new CliError(`${path} was written for another API key; name another state file with --state, or delete it to start afresh`, EXIT.USAGE);
            }
            return;
          }
          if (!raw.trim()) return;
          let line: Line;
          try {
            line = JSON.parse(raw) as Line;
          } catch {
            // A line torn by a kill mid-write: what it said is redone.
            return;
          }
          state.apply(line);
        });
      } catch (err) {
        if (err instanceof CliError) throw err;
        throw new CliError(`cannot read the state file ${path}: ${(err as Error).message}`, EXIT.USAGE);
      } finally {
        closeSync(fd);
      }
    }
    try {
      closeSync(openSync(path, 'a'));
      if (read.empty) appendFileSync(path, `${JSON.stringify(header)}\n`);
      // A torn last line would swallow the next record: start it on a line of its own.
      else if (!read.endsWithNewline) appendFileSync(path, '\n');
    } catch (err) {
      throw new CliError(`cannot write the state file ${path}: ${(err as Error).message} (name another with --state)`, EXIT.USAGE);
    }
    return state;
  }

  private apply(line: Line): void {
    if ('hash' in line) this.hashes.set(line.hash.path, line.hash);
    else if ('upload' in line) this.begun.set(line.upload.sha256, line.upload.id);
    else if ('uploaded' in line) {
      // The id it was begun under, most often: that string, not a second copy of it.
      const begun = this.begun.get(line.uploaded.sha256);
      this.uploaded.set(line.uploaded.sha256, begun === line.uploaded.uploadId ? begun : line.uploaded.uploadId);
      this.uploadedAt.set(line.uploaded.sha256, line.uploaded.at ?? 0);
    } else if ('expired' in line) {
      this.uploaded.delete(line.expired.sha256);
      this.begun.delete(line.expired.sha256);
    }
    else if ('refused' in line) this.refused.set(line.refused.sha256, { code: line.refused.code, message: line.refused.message });
    else if ('submit' in line) this.submits.set(line.submit.plan, line.submit.requestId);
    else if ('batch' in line) this.batches.set(line.batch.plan, line.batch.id);
  }

  /**
   * Drops the hashes read from the journal once the hashing has used them: no other step reads
   * them, and they are a path and a hash a photo (the journal keeps them for the next run).
   */
  forgetHashes(): void {
    this.hashes.clear();
  }

  /**
   * Applies and appends one event; synchronous, so it is on disk before the step it records goes on.
   * A hash is only appended: this run hashes each file once, so it never looks one up again.
   */
  record(line: Line): void {
    if (!('hash' in line)) this.apply(line);
    appendFileSync(this.path, `${JSON.stringify(line)}\n`);
  }
}

/** What readLines reads at a time. */
const READ_CHUNK = 64 * 1024;

/**
 * Calls `onLine` with each line of the file open at `fd` (without its line feed), read a chunk at a
 * time: a rerun of 10,000 photos never holds its journal of a few MB as one string, nor an array
 * of all its lines. Says whether the file was empty and whether it ended with a line feed.
 */
function readLines(fd: number, onLine: (line: string) => void): { empty: boolean; endsWithNewline: boolean } {
  const chunk = Buffer.allocUnsafe(READ_CHUNK);
  /** The start of a line the chunks read so far have not ended (copies: the chunk is reused). */
  let parts: Buffer[] = [];
  let empty = true;
  let last = 0x0a;
  for (;;) {
    const n = readSync(fd, chunk, 0, chunk.length, null);
    if (n === 0) break;
    empty = false;
    last = chunk[n - 1]!;
    const data = chunk.subarray(0, n);
    let start = 0;
    for (let nl = data.indexOf(0x0a); nl >= 0; nl = data.indexOf(0x0a, start)) {
      const piece = data.subarray(start, nl);
      onLine(parts.length ? Buffer.concat([...parts, piece]).toString('utf8') : piece.toString('utf8'));
      parts = [];
      start = nl + 1;
    }
    if (start < n) parts.push(Buffer.from(data.subarray(start)));
  }
  if (parts.length) onLine(Buffer.concat(parts).toString('utf8'));
  return { empty, endsWithNewline: last === 0x0a };
}
