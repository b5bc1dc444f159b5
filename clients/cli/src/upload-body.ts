import { open, type FileHandle } from 'node:fs/promises';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type * as tus from 'tus-js-client';
import { giveBackReadBuffer, takeReadBuffer } from './files.ts';

/**
 * How an upload's bytes go from the photo's file to the API: tus-js-client's file reader and HTTP
 * stack for the CLI (docs/decisions.md, "The CLI's memory does not grow with the fleet"). Its own
 * Node ones read each slice as a read stream, which allocates a new 64 KiB buffer for every chunk
 * read: 4 GB of photos is 60,000 buffers, freed only when the collector gets to them, and the
 * process' resident memory grew with the folder. Here a slice is where its bytes are (a
 * FileRange), and the request reads them into one buffer, writes it, waits until the socket has
 * taken it (the write's callback), and reads the next into the same buffer: a few buffers for the
 * whole run, as many as uploads ever ran at once. A buffer whose write was cut short (an abort,
 * a lost connection) may still be in the socket's hands: it is dropped, never used again.
 */

type TusOptions = ConstructorParameters<typeof tus.Upload>[1];


/** A photo to send, as tus-js-client's input. */
export interface FileInput {
  path: string;
  size: number;
}

/** A slice of a photo: its file and the byte range [start, end). */
export class FileRange {
  constructor(
    readonly path: string,
    readonly start: number,
    readonly end: number,
  ) {}

  get size(): number {
    return this.end - this.start;
  }
}

/** tus-js-client's file reader for a FileInput: each slice is a FileRange, nothing is read yet. */
export const fileRanges: NonNullable<TusOptions['fileReader']> = {
  openFile: (input: FileInput) =>
    Promise.resolve({
      size: input.size,
      slice: (start: number, end: number) => {
        const to = Math.min(end, input.size);
        return Promise.resolve({ value: new FileRange(input.path, start, to), done: to >= input.size });
      },
      close: () => undefined,
    }),
};

/** tus-js-client's HTTP stack sending a FileRange body through a reused buffer (other bodies as they are). */
export const rangeHttpStack: tus.HttpStack = {
  createRequest: (method, url) => new RangeRequest(method, url),
  getName: () => 'lenstack-cli',
};

class RangeRequest implements tus.HttpRequest {
  readonly #headers: Record<string, string> = {};
  #request: ClientRequest | null = null;
  #onProgress: (sent: number) => void = () => undefined;

  constructor(
    private readonly method: string,
    private readonly url: string,
  ) {}

  getMethod(): string {
    return this.method;
  }

  getURL(): string {
    return this.url;
  }

  setHeader(header: string, value: string): void {
    this.#headers[header] = value;
  }

  getHeader(header: string): string | undefined {
    return this.#headers[header];
  }

  setProgressHandler(handler: (sent: number) => void): void {
    this.#onProgress = handler;
  }

  getUnderlyingObject(): ClientRequest | null {
    return this.#request;
  }

  abort(): Promise<void> {
    this.#request?.destroy();
    return Promise.resolve();
  }

  send(body: unknown): Promise<tus.HttpResponse> {
    return new Promise((resolve, reject) => {
      const url = new URL(this.url);
      const headers = body instanceof FileRange ? { ...this.#headers, 'Content-Length': String(body.size) } : this.#headers;
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, { method: this.method, headers });
      this.#request = req;
      req.on('response', (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(new RangeResponse(res, Buffer.concat(chunks).toString('utf8'))));
        res.on('error', reject);
      });
      req.on('error', reject);
      if (body instanceof FileRange) {
        writeRange(req, body, this.#onProgress).catch((err: unknown) => req.destroy(err as Error));
      } else if (body === null || body === undefined) {
        req.end();
      } else {
        req.end(body as Buffer | string);
      }
    });
  }
}

class RangeResponse implements tus.HttpResponse {
  constructor(
    private readonly res: IncomingMessage,
    private readonly body: string,
  ) {}

  getStatus(): number {
    return this.res.statusCode ?? 0;
  }

  getHeader(header: string): string | undefined {
    const value = this.res.headers[header.toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : value;
  }

  getBody(): string {
    return this.body;
  }

  getUnderlyingObject(): IncomingMessage {
    return this.res;
  }
}

/** Writes `chunk` and waits until the socket has taken it; fails if the request ends first. */
function written(req: ClientRequest, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const ended = () => reject(new Error('the request ended before its body was sent'));
    req.once('close', ended);
    req.write(chunk, (err) => {
      req.off('close', ended);
      if (err) reject(err);
      else resolve();
    });
  });
}

/** Sends the range's bytes as the request's body, a buffer at a time, then ends the request. */
async function writeRange(req: ClientRequest, range: FileRange, onProgress: (sent: number) => void): Promise<void> {
  const buffer = takeReadBuffer();
  let whole = false;
  let file: FileHandle | undefined;
  try {
    file = await open(range.path, 'r');
    for (let at = range.start; at < range.end; ) {
      const { bytesRead } = await file.read(buffer, 0, Math.min(buffer.length, range.end - at), at);
      if (bytesRead === 0) throw new Error(`${range.path} ends at ${at} bytes, short of the ${range.end} it had when it was found`);
      await written(req, buffer.subarray(0, bytesRead));
      at += bytesRead;
      onProgress(at - range.start);
    }
    req.end();
    whole = true;
  } finally {
    // Free for the next body as soon as the socket took the last of it (before the file is closed).
    if (whole) giveBackReadBuffer(buffer);
    await file?.close().catch(() => undefined);
  }
}
