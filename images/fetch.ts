import http from 'node:http';
import https from 'node:https';
import type { LookupAddress } from 'node:dns';
import { AppError, imageInvalid, imageTooLarge } from '../core/errors.ts';
import { defaultLookup } from './dns.ts';
import {
  isPublicAddress,
  parseImageUrl,
  pinnedLookup,
  resolveAllowed,
  urlHost,
  type AddressPolicy,
  type LookupFn,
} from './ssrf.ts';

/**
 * Fetches an image URL for intake: SSRF-checked on every hop, connected only to checked
 * addresses, size-capped while streaming, bounded in time end to end.
 */

export interface FetchImageOptions {
  /** Largest body accepted; checked against Content-Length and again while streaming. */
  maxBytes: number;
  /** Whole fetch (DNS, connects, every redirect hop, body) must finish within this. */
  timeoutMs?: number;
  /** TCP (and TLS) connect of one hop must finish within this. */
  connectTimeoutMs?: number;
  /** Redirects followed before giving up. */
  maxRedirects?: number;
  /** Replaces the public-address policy (tests use it to treat 127.0.0.2 as public). */
  allowAddress?: AddressPolicy;
  /** DNS resolver; by default c-ares off the thread pool (images/dns.ts), never dns.lookup. */
  lookup?: LookupFn;
  /** Trusted CA certificates (PEM) for https instead of Node's bundled roots: tests, private PKI. */
  ca?: string | Buffer;
}

export interface FetchedImage {
  bytes: Buffer;
  contentType?: string;
  /** URL of the hop that answered with the body, after redirects. */
  finalUrl: string;
}

export const FETCH_DEFAULTS = { timeoutMs: 15_000, connectTimeoutMs: 5_000, maxRedirects: 3 } as const;

/**
 * How a process fetches caller-supplied image URLs: which addresses it may reach, its resolver,
 * timeouts and trusted CAs. Chosen by the composition root (api/server.ts: PUBLIC_INTERNET); a
 * test injects one that also treats its own loopback server as public. The size limit is not a
 * policy: each caller passes IMAGE_MAX_BYTES.
 */
export type FetchPolicy = Readonly<Omit<FetchImageOptions, 'maxBytes'>>;

/** Production: public addresses only, the default resolver and timeouts. */
export const PUBLIC_INTERNET: FetchPolicy = Object.freeze({ allowAddress: isPublicAddress });

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const USER_AGENT = 'LenstackImageFetcher/1.0';

class ConnectTimeout extends Error {
  override name = 'ConnectTimeout';
}

export async function fetchImage(url: string, opts: FetchImageOptions): Promise<FetchedImage> {
  const timeoutMs = opts.timeoutMs ?? FETCH_DEFAULTS.timeoutMs;
  const connectTimeoutMs = opts.connectTimeoutMs ?? FETCH_DEFAULTS.connectTimeoutMs;
  const maxRedirects = opts.maxRedirects ?? FETCH_DEFAULTS.maxRedirects;
  const policy = { allowAddress: opts.allowAddress ?? isPublicAddress, lookup: opts.lookup ?? defaultLookup() };

  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  try {
    let current = parseImageUrl(url);
    for (let redirects = 0; ; redirects++) {
      const addresses = await untilAborted(resolveAllowed(current, policy), deadline.signal);
      const res = await get(current, addresses, { signal: deadline.signal, connectTimeoutMs, ca: opts.ca });
      const status = res.statusCode ?? 0;
      if (REDIRECT_STATUSES.has(status)) {
        res.destroy(); // never read a redirect body: it may be endless
        if (redirects >= maxRedirects) throw imageInvalid(`Image URL redirected more than ${maxRedirects} times`);
        const location = res.headers.location;
        if (!location) throw imageInvalid(`Image URL answered HTTP ${status} without a Location`);
        current = parseImageUrl(location, current); // the next hop is vetted from scratch
        continue;
      }
      if (status < 200 || status > 299) {
        res.destroy();
        throw imageInvalid(`Image URL answered HTTP ${status}`);
      }
      const bytes = await readCapped(res, opts.maxBytes);
      const contentType = res.headers['content-type'];
      return contentType === undefined ? { bytes, finalUrl: current.href } : { bytes, contentType, finalUrl: current.href };
    }
  } catch (err) {
    throw toAppError(err, deadline.signal.aborted, timeoutMs, connectTimeoutMs);
  } finally {
    clearTimeout(timer);
  }
}

interface HopOptions {
  signal: AbortSignal;
  connectTimeoutMs: number;
  ca: string | Buffer | undefined;
}

function get(url: URL, addresses: LookupAddress[], { signal, connectTimeoutMs, ca }: HopOptions): Promise<http.IncomingMessage> {
  const { host } = urlHost(url);
  const secure = url.protocol === 'https:';
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(
      {
        protocol: url.protocol,
        host, // Host header and TLS SNI/certificate check use the real name…
        port: url.port === '' ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headers: { 'user-agent': USER_AGENT, accept: 'image/*', 'accept-encoding': 'identity' },
        lookup: pinnedLookup(addresses), // …while the socket goes only to the checked addresses
        agent: false, // no pooled sockets shared across requests or names
        signal,
        ...(secure && ca !== undefined ? { ca } : {}),
      },
      resolve,
    );
    req.once('error', reject);
    req.once('socket', (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(() => req.destroy(new ConnectTimeout()), connectTimeoutMs);
      socket.once(secure ? 'secureConnect' : 'connect', () => clearTimeout(timer));
      socket.once('close', () => clearTimeout(timer));
    });
    req.end();
  });
}

async function readCapped(res: http.IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw imageTooLarge(`Image is ${declared} bytes, over the ${maxBytes}-byte limit`);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) {
      res.destroy(); // stop the download now, not at the end of an endless stream
      throw imageTooLarge(`Image exceeds the ${maxBytes}-byte limit`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  // A lookup cannot be cancelled; stop waiting for it when the deadline passes.
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => (signal.removeEventListener('abort', onAbort), resolve(v)),
      (e: unknown) => (signal.removeEventListener('abort', onAbort), reject(e)),
    );
  });
}

function toAppError(err: unknown, timedOut: boolean, timeoutMs: number, connectTimeoutMs: number): AppError {
  if (err instanceof AppError) return err;
  if (timedOut) return imageInvalid(`Image URL did not answer within ${timeoutMs} ms`);
  if (err instanceof ConnectTimeout) return imageInvalid(`Image URL host did not accept a connection within ${connectTimeoutMs} ms`);
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ECONNREFUSED') return imageInvalid('Image URL host refused the connection');
  return imageInvalid(`Image URL could not be fetched (${code ?? (err instanceof Error ? err.message : String(err))})`);
}
