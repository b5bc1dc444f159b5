import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Image bytes, addressed by their SHA-256. Workflows carry the hash, never the bytes
 * (docs/architecture.md: nothing big travels through Temporal). S3-compatible stores implement the same interface.
 */
export interface BlobStore {
  /**
   * Stores bytes under their hash; storing the same blob again is a no-op. True when this call
   * created it. The store hashes the bytes to check the key, unless `verified`: the caller computed
   * the key from these very bytes (uploads/service.ts `complete`, which hashes what it read back;
   * images/intake.ts, which hashed the request's bytes a moment before); every other caller leaves it out.
   */
  put(sha256: string, bytes: Buffer, opts?: PutOptions): Promise<boolean>;
  /**
   * `put` in two halves, for a caller that must hold the blob (an intake lease) before it may
   * appear but need not wait for that to write it: the bytes are written and synced where no
   * reader sees them, and `commit` names them (true when it created the blob, as `put`). A store
   * that writes in one step (S3) has none; its callers `put` once they may.
   */
  stage?(sha256: string, bytes: Buffer, opts?: PutOptions): Promise<StagedBlob>;
  /** The stored bytes; rejects with BlobNotFoundError when absent. */
  get(sha256: string): Promise<Buffer>;
  has(sha256: string): Promise<boolean>;
  /** Removes a blob; removing an absent one is a no-op. */
  delete(sha256: string): Promise<void>;
  /**
   * Every stored blob with when it was written, for the collector of unreferenced blobs. With
   * `removeTemporaryBefore` (the collector's grace), a store that writes through temporary files
   * (the filesystem's) also removes, in the same walk, those of writes begun before it and never
   * named: a process that died between a stage and its commit.
   */
  list(opts?: { removeTemporaryBefore?: Date }): AsyncIterable<{ sha256: string; writtenAt: Date; bytes: number }>;
}

export interface PutOptions {
  /** The key is the SHA-256 of exactly these bytes, computed by the caller: not hashed again. */
  verified?: boolean;
}

/** Bytes written but not yet named (`BlobStore.stage`): exactly one of `commit` or `discard` follows. */
export interface StagedBlob {
  commit(): Promise<boolean>;
  discard(): Promise<void>;
}

export class BlobNotFoundError extends Error {
  override name = 'BlobNotFoundError';
  readonly code = 'BLOB_NOT_FOUND';
  constructor(readonly sha256: string) {
    super(`Blob ${sha256} is not in the blob store`);
  }
}

export const SHA256_HEX = /^[0-9a-f]{64}$/;

/** A write under way (`stage`, `put`): `.<sha256>.<12 hex>.tmp` beside where the blob will be named. */
const TEMP_NAME = /^\.[0-9a-f]{64}\.[0-9a-f]{12}\.tmp$/;

/** A blob key is a lowercase hex SHA-256 and nothing else (no path tricks), in every store. */
export function assertSha256(sha256: string): void {
  if (!SHA256_HEX.test(sha256)) throw new RangeError(`Not a lowercase hex SHA-256: ${JSON.stringify(sha256.slice(0, 80))}`);
}

/** Filesystem store: <root>/ab/cd/<sha256>, written to a temp file and renamed into place. */
export class FsBlobStore implements BlobStore {
  constructor(private readonly rootDir: string) {}

  /** Where a blob lives; the two shard levels keep directories small at millions of blobs. */
  pathOf(sha256: string): string {
    assertSha256(sha256);
    return path.join(this.rootDir, sha256.slice(0, 2), sha256.slice(2, 4), sha256);
  }

  async put(sha256: string, bytes: Buffer, opts: PutOptions = {}): Promise<boolean> {
    return (await this.stage(sha256, bytes, opts)).commit();
  }

  async stage(sha256: string, bytes: Buffer, opts: PutOptions = {}): Promise<StagedBlob> {
    const target = this.pathOf(sha256);
    // Stored already: nothing is written, so nothing needs checking (a cache hit of a large photo
    // does not hash its bytes a second time). Gone again by the commit, it is written then.
    if (await this.has(sha256)) {
      return { commit: async () => (await this.has(sha256)) ? false : this.put(sha256, bytes, opts), discard: async () => {} };
    }
    // A wrong key would poison every later reader of that hash, so the store checks it before
    // writing, unless its caller computed it from these bytes.
    if (!opts.verified) {
      const actual = createHash('sha256').update(bytes).digest('hex');
      if (actual !== sha256) throw new Error(`Blob content hashes to ${actual}, not ${sha256}`);
    }

    await mkdir(path.dirname(target), { recursive: true });
    // Same directory as the target so rename is atomic; readers never see a partial file.
    const tmp = path.join(path.dirname(target), `.${sha256}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      const fh = await open(tmp, 'wx');
      try {
        await fh.writeFile(bytes);
        await fh.sync(); // the data is on disk before the name points at it
      } finally {
        await fh.close();
      }
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    let settled = false;
    const discard = async () => {
      if (settled) return;
      settled = true;
      await rm(tmp, { force: true });
    };
    return {
      commit: async () => {
        if (settled) throw new Error(`blob ${sha256}: staged bytes already committed or discarded`);
        try {
          await rename(tmp, target); // concurrent puts of one blob both succeed; the content is identical
          settled = true;
          return true;
        } catch (err) {
          await discard();
          throw err;
        }
      },
      discard,
    };
  }

  async get(sha256: string): Promise<Buffer> {
    try {
      return await readFile(this.pathOf(sha256));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BlobNotFoundError(sha256);
      throw err;
    }
  }

  async delete(sha256: string): Promise<void> {
    await rm(this.pathOf(sha256), { force: true });
  }

  async *list(opts: { removeTemporaryBefore?: Date } = {}): AsyncIterable<{ sha256: string; writtenAt: Date; bytes: number }> {
    const level = async (dir: string) => (await readdir(dir, { withFileTypes: true }).catch(() => [])).filter((e) => e.isDirectory()).map((e) => path.join(dir, e.name));
    const before = opts.removeTemporaryBefore;
    for (const first of await level(this.rootDir)) {
      for (const second of await level(first)) {
        for (const name of await readdir(second).catch(() => [] as string[])) {
          const file = path.join(second, name);
          if (SHA256_HEX.test(name)) {
            const info = await stat(file).catch(() => null);
            if (info?.isFile()) yield { sha256: name, writtenAt: info.mtime, bytes: info.size };
          } else if (before && TEMP_NAME.test(name)) {
            // A write under way is not listed; one begun before `before` and never named is removed.
            const info = await stat(file).catch(() => null);
            if (info?.isFile() && info.mtime < before) await rm(file, { force: true });
          }
        }
      }
    }
  }

  async has(sha256: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(sha256))).isFile();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }
}
