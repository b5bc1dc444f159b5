import net from 'node:net';
import type { Answer } from './report.ts';

/**
 * A deliberately naive HTTP/1.1 client over a raw TCP socket: it sends exactly the bytes it is
 * given (duplicate headers, non-ASCII header bytes, odd methods, conflicting lengths), so the
 * fuzzer can reach what Node's HTTP parser and Fastify see before any route runs. One request
 * per connection; the answer is parsed from the bytes that come back.
 */

export interface RawRequest {
  method: string;
  /** Request target as sent (path and query, already encoded or deliberately not). */
  target: string;
  /** Header lines in order; a name may repeat. Values are written as latin1 bytes. */
  headers: Array<[string, string]>;
  body?: Buffer;
  /** Add a correct Content-Length when the headers have none (default true when there is a body). */
  contentLength?: boolean;
}

export function encodeRequest(r: RawRequest): Buffer {
  const lines = [`${r.method} ${r.target} HTTP/1.1`];
  const names = new Set(r.headers.map(([n]) => n.toLowerCase()));
  const headers = [...r.headers];
  if (!names.has('host')) headers.unshift(['host', '127.0.0.1']);
  if (!names.has('connection')) headers.push(['connection', 'close']);
  if (r.body && r.contentLength !== false && !names.has('content-length') && !names.has('transfer-encoding')) headers.push(['content-length', String(r.body.length)]);
  for (const [n, v] of headers) lines.push(`${n}: ${v}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), r.body ?? Buffer.alloc(0)]);
}

/** Sends one request; resolves with the first complete answer, or status 0 when none came. */
export function rawRequest(port: number, r: RawRequest, timeoutMs = 15_000): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let received = Buffer.alloc(0);
    let done = false;
    const finish = (answer: Omit<Answer, 'ms'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...answer, ms: performance.now() - started });
    };
    const timer = setTimeout(() => finish({ status: 0, body: `no complete answer within ${timeoutMs} ms: ${received.toString('latin1', 0, 200)}`, headers: {} }), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const parsed = parseResponse(received, false);
      if (parsed) finish(parsed);
    });
    socket.on('end', () => finish(parseResponse(received, true) ?? { status: 0, body: `connection closed: ${received.toString('latin1', 0, 200)}`, headers: {} }));
    socket.on('error', (err) => finish(parseResponse(received, true) ?? { status: 0, body: `socket error ${err.message}`, headers: {} }));
    socket.write(encodeRequest(r));
  });
}

/** The response in `bytes`, or null while it is incomplete (unless the stream `ended`). */
export function parseResponse(bytes: Buffer, ended: boolean): Omit<Answer, 'ms'> | null {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd < 0) return null;
  const [statusLine, ...headerLines] = bytes.toString('latin1', 0, headEnd).split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0);
  // An interim answer (100 Continue to `Expect: 100-continue`, 103 Early Hints) comes before the
  // real one on the same connection: skip it.
  if (status >= 100 && status < 200 && status !== 101) return parseResponse(bytes.subarray(headEnd + 4), ended);
  const headers: Record<string, string | string[]> = {};
  for (const line of headerLines) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).trim().toLowerCase();
    const value = line.slice(i + 1).trim();
    const prev = headers[name];
    headers[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  const rest = bytes.subarray(headEnd + 4);
  let body: Buffer | null;
  if (/chunked/i.test(String(headers['transfer-encoding'] ?? ''))) body = dechunk(rest);
  else if (headers['content-length'] !== undefined) {
    const len = Number(headers['content-length']);
    body = rest.length >= len ? rest.subarray(0, len) : null;
  } else body = ended ? rest : null;
  if (body === null) return ended ? { status, headers, body: rest.toString('utf8') } : null;
  return { status, headers, body: body.toString('utf8') };
}

function dechunk(b: Buffer): Buffer | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = b.indexOf('\r\n', at);
    if (lineEnd < 0) return null;
    const size = parseInt(b.toString('latin1', at, lineEnd), 16);
    if (Number.isNaN(size)) return null;
    if (size === 0) return Buffer.concat(parts);
    if (b.length < lineEnd + 2 + size + 2) return null;
    parts.push(b.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
