import dns, { type LookupAddress } from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import type { LookupFn } from '../../../images/ssrf.ts';
import { DNS_ANSWERS, REBIND_NAME, WILDCARD_ANSWER } from '../ssrf-corpus.ts';

/**
 * The "public internet" of the SSRF suite: an HTTP server on 127.0.0.2 (on the canary's port)
 * serving one valid image and redirects of every status to any target, and a resolver that
 * answers from the corpus' DNS table.
 */

export interface RedirectServer {
  origin: string;
  /** Requests per path (without the query). */
  hits: Map<string, number>;
  close(): Promise<void>;
}

export async function startRedirectServer(opts: { port: number; image: Buffer }): Promise<RedirectServer> {
  const hits = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.2');
    hits.set(url.pathname, (hits.get(url.pathname) ?? 0) + 1);
    // /r/<status>/<hops>?to=<target>: hops-1 plain 302s to itself, then <status> to <target>.
    const r = /^\/r\/(\d{3})\/(\d+)$/.exec(url.pathname);
    if (r) {
      const status = Number(r[1]);
      const hops = Number(r[2]);
      const to = url.searchParams.get('to') ?? '/';
      const location = hops > 1 ? `/r/${status}/${hops - 1}?to=${encodeURIComponent(to)}` : to;
      return res.writeHead(hops > 1 ? 302 : status, { location }).end();
    }
    switch (url.pathname) {
      case '/image.png':
        return res.writeHead(200, { 'content-type': 'image/png', 'content-length': opts.image.length }).end(opts.image);
      case '/loop':
        return res.writeHead(302, { location: '/loop' }).end();
      case '/no-location':
        return res.writeHead(302).end();
      default:
        return res.writeHead(404, { 'content-type': 'text/plain' }).end('not here');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, '127.0.0.2', () => resolve());
  });
  return {
    origin: `http://127.0.0.2:${opts.port}`,
    hits,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A dns.lookup stand-in answering from DNS_ANSWERS; records every name asked. */
export function corpusResolver(): LookupFn & { calls: string[] } {
  const calls: string[] = [];
  const seen = new Set<string>();
  const fn: LookupFn = (hostname, options, callback) => {
    calls.push(hostname);
    const name = hostname.toLowerCase().replace(/\.$/, '');
    const answer = (addresses: string[]) =>
      setImmediate(() => callback(null, addresses.map((address): LookupAddress => ({ address, family: net.isIP(address) === 6 ? 6 : 4 }))));
    if (REBIND_NAME.test(name)) {
      const first = !seen.has(name);
      seen.add(name);
      return answer(first ? ['127.0.0.2'] : ['127.0.0.1']);
    }
    const listed = DNS_ANSWERS[name] ?? (name.endsWith('.localhost') ? DNS_ANSWERS['sub.localhost'] : undefined);
    if (listed === 'system') return dns.lookup(name, options, callback);
    if (listed === 'ENOTFOUND') {
      const err: NodeJS.ErrnoException = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return setImmediate(() => callback(err, []));
    }
    return answer(listed ?? WILDCARD_ANSWER);
  };
  return Object.assign(fn, { calls });
}
