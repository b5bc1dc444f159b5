import { randomBytes } from 'node:crypto';
import { constants as fsConstants, unlinkSync } from 'node:fs';
import { access, copyFile, link, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { CliError, EXIT } from './exit-codes.ts';
import { stopsInOrder } from './interrupt.ts';

/**
 * A file the CLI will write, claimed before anything is charged: a partial file beside the target,
 * created exclusively ('wx'), proves the folder is writable. The result is written into it and then
 * linked to the target, which fails if the target appeared meanwhile (no check-then-write race);
 * `force` renames over it instead.
 *
 * Ctrl-C (or SIGTERM) while the file is claimed removes the partial file before the process ends,
 * unless a step is stopping the command in order (the uploads', interrupt.ts), which abandons it itself.
 */
export class OutputFile {
  private constructor(
    readonly target: string,
    readonly partial: string,
    /**
     * The partial file, open from the claim until the result is in it (or the command gave up): the
     * result is written through it, so nothing creates the file again after a signal removed it.
     */
    private readonly handle: FileHandle,
    private readonly force: boolean,
    /** Writes the line the process ends with when a signal stops it (main's form: JSON under --json). */
    private readonly sayInterrupted: (err: CliError) => void,
  ) {}

  /** Set once the result is in the partial file: from then on it is never removed. */
  #written = false;

  static async claim(target: string, force: boolean, sayInterrupted: (err: CliError) => void): Promise<OutputFile> {
    if (!force && (await exists(target))) throw new CliError(`${target} exists; pass --force to replace it`, EXIT.USAGE);
    const partial = `${target}.partial-${process.pid}-${randomBytes(4).toString('hex')}`;
    let handle: FileHandle;
    try {
      handle = await open(partial, 'wx');
    } catch (err) {
      throw new CliError(`cannot write ${target}: ${(err as Error).message}`, EXIT.USAGE);
    }
    const file = new OutputFile(target, partial, handle, force, sayInterrupted);
    process.on('SIGINT', file.#onSignal);
    process.on('SIGTERM', file.#onSignal);
    return file;
  }

  /**
   * A signal with nobody else to handle it ends the process as it would have (exit 130, the CLI's
   * "interrupted"), without the partial file: a Ctrl-C while hashing, following the batch or
   * downloading its export leaves nothing beside the target.
   */
  #onSignal = (): void => {
    if (stopsInOrder()) return;
    if (!this.#written) {
      try {
        unlinkSync(this.partial);
      } catch {
        // already gone
      }
    }
    this.sayInterrupted(new CliError(`interrupted: nothing was written to ${this.target}`, EXIT.INTERRUPTED));
    process.exit(EXIT.INTERRUPTED);
  };

  #release(): void {
    process.removeListener('SIGINT', this.#onSignal);
    process.removeListener('SIGTERM', this.#onSignal);
  }

  /**
   * Writes the bytes to the target. When the target appeared meanwhile, they stay in the partial
   * file, named in the error. A stream (an export: bounded memory however large the batch) is
   * written to the partial file as it arrives; one that breaks off leaves nothing behind and exits
   * as a network failure, so the same command downloads it again.
   */
  async commit(bytes: Uint8Array | ReadableStream<Uint8Array>): Promise<void> {
    try {
      if (bytes instanceof Uint8Array) await this.handle.writeFile(bytes);
      else await this.#download(bytes);
      await this.handle.close();
      this.#written = true;
      this.#release();
    } catch (err) {
      await this.abandon();
      if (err instanceof CliError) throw err;
      throw new CliError(`cannot write ${this.target}: ${(err as Error).message}`, EXIT.USAGE);
    }
    try {
      if (this.force) await rename(this.partial, this.target);
      else {
        await link(this.partial, this.target).catch(async (err: NodeJS.ErrnoException) => {
          // FAT/exFAT, many SMB and FUSE mounts have no hard links: an exclusive copy never
          // replaces a file either.
          if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV'].includes(err.code ?? '')) throw err;
          await copyFile(this.partial, this.target, fsConstants.COPYFILE_EXCL);
        });
        // The result is in place: a partial left behind is only untidy.
        await unlink(this.partial).catch(() => {});
      }
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code === 'EEXIST' ? 'it was created meanwhile (pass --force to replace it)' : (err as Error).message;
      throw new CliError(`cannot write ${this.target}: ${why}; the result is in ${this.partial}`, EXIT.USAGE);
    }
  }

  /**
   * The stream into the partial file, chunk by chunk through its reader (the CLI is also compiled
   * against the DOM's stream types, which are not async-iterable). A body that breaks off is a
   * network failure (the same command downloads it again); a write that fails cancels the download.
   */
  async #download(body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = body.getReader();
    try {
      for (;;) {
        const next = await reader.read().catch((err: Error) => {
          throw new CliError(`the download of ${this.target} broke off: ${err.message}; run the same command again`, EXIT.NETWORK);
        });
        if (next.done) return;
        await this.handle.writeFile(next.value);
      }
    } catch (err) {
      if (!(err instanceof CliError)) await reader.cancel().catch(() => {});
      throw err;
    }
  }

  /** Removes the partial file unless it holds a result (the command failed before it had one). */
  async abandon(): Promise<void> {
    this.#release();
    if (this.#written) return;
    await this.handle.close().catch(() => {});
    await unlink(this.partial).catch(() => {});
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
