import { appendFileSync, closeSync, openSync, readFileSync } from 'node:fs';
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
    let text = '';
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new CliError(`cannot read the state file ${path}: ${(err as Error).message}`, EXIT.USAGE);
    }
    const lines = text.split('\n');
    if (text !== '') {
      let found: { lenstack?: unknown; key?: unknown } | null;
      try {
        found = JSON.parse(lines[0]!) as typeof found;
      } catch {
        found = null;
      }
      if (found?.lenstack !== KIND) throw new CliError(`${path} is not a lenstack batch state file; name another with --state`, EXIT.USAGE);
      // Its uploads and batches are another key's (another account's, or another deployment's): they
      // would answer 404 here. Not the API's address: the same API is reached by many (a proxy, a host name).
      if (found.key !== owner.key) {
        throw new CliError(`${path} was written for another API key; name another state file with --state, or delete it to start afresh`, EXIT.USAGE);
      }
      for (const raw of lines.slice(1)) {
        if (!raw.trim()) continue;
        let line: Line;
        try {
          line = JSON.parse(raw) as Line;
        } catch {
          // A line torn by a kill mid-write: what it said is redone.
          continue;
        }
        state.apply(line);
      }
    }
    try {
      closeSync(openSync(path, 'a'));
      if (text === '') appendFileSync(path, `${JSON.stringify(header)}\n`);
      // A torn last line would swallow the next record: start it on a line of its own.
      else if (!text.endsWith('\n')) appendFileSync(path, '\n');
    } catch (err) {
      throw new CliError(`cannot write the state file ${path}: ${(err as Error).message} (name another with --state)`, EXIT.USAGE);
    }
    return state;
  }

  private apply(line: Line): void {
    if ('hash' in line) this.hashes.set(line.hash.path, line.hash);
    else if ('upload' in line) this.begun.set(line.upload.sha256, line.upload.id);
    else if ('uploaded' in line) {
      this.uploaded.set(line.uploaded.sha256, line.uploaded.uploadId);
      this.uploadedAt.set(line.uploaded.sha256, line.uploaded.at ?? 0);
    } else if ('expired' in line) {
      this.uploaded.delete(line.expired.sha256);
      this.begun.delete(line.expired.sha256);
    }
    else if ('refused' in line) this.refused.set(line.refused.sha256, { code: line.refused.code, message: line.refused.message });
    else if ('submit' in line) this.submits.set(line.submit.plan, line.submit.requestId);
    else if ('batch' in line) this.batches.set(line.batch.plan, line.batch.id);
  }

  /** Applies and appends one event; synchronous, so it is on disk before the step it records goes on. */
  record(line: Line): void {
    this.apply(line);
    appendFileSync(this.path, `${JSON.stringify(line)}\n`);
  }
}
