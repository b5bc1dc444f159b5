import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import type { LookupFn } from '../../images/ssrf.ts';

/**
 * Local servers for the fetcher tests. The canary listens on 127.0.0.1 (and ::1 when available)
 * and only counts connections: any SSRF hole shows up as a count above zero. The "public" image
 * server listens on 127.0.0.2 on the SAME port, so a misdirected connection for any test URL
 * lands on the canary rather than failing quietly.
 */

export interface Canary {
  port: number;
  connections(): number;
  close(): Promise<void>;
}

export interface PublicServer {
  port: number;
  origin: string;
  /** Requests per path. */
  hits: Map<string, number>;
  /** Host headers received, in order. */
  hosts: string[];
  /** Resolves when the socket of the /endless response closes. */
  endlessClosed: Promise<void>;
  close(): Promise<void>;
}

const listen = (server: net.Server, port: number, host: string) =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

const closeServer = (server: net.Server) => new Promise<void>((resolve) => server.close(() => resolve()));

export async function startCanary(): Promise<Canary> {
  let count = 0;
  const make = () =>
    net.createServer((socket) => {
      count += 1;
      socket.destroy();
    });
  const v4 = make();
  await listen(v4, 0, '127.0.0.1');
  const port = (v4.address() as net.AddressInfo).port;
  const servers = [v4];
  const v6 = make();
  // ::1 may be unavailable in some containers; the IPv4 canary still covers mapped forms.
  await listen(v6, port, '::1').then(
    () => servers.push(v6),
    () => undefined,
  );
  return { port, connections: () => count, close: async () => void (await Promise.all(servers.map(closeServer))) };
}

export async function startPublicServer(opts: { port: number; image: Buffer; canaryPort: number }): Promise<PublicServer> {
  const hits = new Map<string, number>();
  const hosts: string[] = [];
  let endlessDone!: () => void;
  const endlessClosed = new Promise<void>((resolve) => (endlessDone = resolve));
  const timers = new Set<NodeJS.Timeout>();

  const server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    hosts.push(req.headers.host ?? '');
    const redirect = (location: string) => res.writeHead(302, { location }).end();

    const chain = /^\/chain\/(\d+)$/.exec(path);
    if (chain) {
      const n = Number(chain[1]);
      return redirect(n > 1 ? `/chain/${n - 1}` : '/image.jpg');
    }
    switch (path) {
      case '/image.jpg':
        return res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': opts.image.length }).end(opts.image);
      case '/chunked.jpg': {
        // No Content-Length: the cap must be enforced on the stream itself.
        res.writeHead(200, { 'content-type': 'image/jpeg' });
        const third = Math.ceil(opts.image.length / 3);
        for (let i = 0; i < opts.image.length; i += third) res.write(opts.image.subarray(i, i + third));
        return res.end();
      }
      case '/loop':
        return redirect('/loop');
      case '/to-canary':
        return redirect(`http://127.0.0.1:${opts.canaryPort}/secret`);
      case '/to-canary-decimal':
        return redirect(`http://2130706433:${opts.canaryPort}/secret`);
      case '/to-canary-v6':
        return redirect(`http://[::ffff:127.0.0.1]:${opts.canaryPort}/secret`);
      case '/to-file':
        return redirect('file:///etc/passwd');
      case '/missing':
        return res.writeHead(404, { 'content-type': 'text/plain' }).end('not here');
      case '/endless': {
        res.writeHead(200, { 'content-type': 'image/jpeg' });
        const chunk = Buffer.alloc(64 * 1024, 0xab);
        const pump = () => {
          while (!res.destroyed && res.write(chunk));
        };
        res.on('drain', pump);
        res.socket?.once('close', () => endlessDone());
        return pump();
      }
      case '/declared-huge':
        res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': 1_000_000_000 });
        return res.flushHeaders(); // and never a byte of body
      case '/drip': {
        // A byte every 20 ms forever: never idle, never finished.
        res.writeHead(200, { 'content-type': 'image/jpeg' });
        const timer = setInterval(() => res.write(Buffer.from([0xff])), 20);
        timers.add(timer);
        return res.socket?.once('close', () => clearInterval(timer));
      }
      case '/short':
        // Promises 1000 bytes, sends 10, hangs up.
        res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': 1000 });
        res.write(opts.image.subarray(0, 10));
        return void setImmediate(() => res.socket?.destroy());
      case '/silent':
        return; // accepts the request, never answers
      default:
        return res.writeHead(404).end();
    }
  });
  await listen(server, opts.port, '127.0.0.2');
  return {
    port: opts.port,
    origin: `http://127.0.0.2:${opts.port}`,
    hits,
    hosts,
    endlessClosed,
    close: async () => {
      for (const t of timers) clearInterval(t);
      server.closeAllConnections();
      await closeServer(server);
    },
  };
}

/** A resolver answering from a script, one answer list per call (the last one repeats). */
export function scriptedLookup(answers: string[][]): LookupFn & { calls: string[] } {
  const calls: string[] = [];
  const fn = (hostname: string, _options: unknown, callback: (err: NodeJS.ErrnoException | null, a: LookupAddress[]) => void) => {
    const answer = answers[Math.min(calls.length, answers.length - 1)]!;
    calls.push(hostname);
    setImmediate(() => callback(null, answer.map((address) => ({ address, family: net.isIP(address) }))));
  };
  return Object.assign(fn, { calls });
}

/** A resolver that fails like an unknown name. */
export const failingLookup: LookupFn = (hostname, _options, callback) => {
  const err: NodeJS.ErrnoException = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  setImmediate(() => callback(err, []));
};

/** A port on 127.0.0.2 with nothing listening. */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await listen(server, 0, '127.0.0.2');
  const { port } = server.address() as net.AddressInfo;
  await closeServer(server);
  return port;
}

/**
 * A canary and a public server on the same port (127.0.0.1 and 127.0.0.2): the canary takes a free
 * port on 127.0.0.1, which another process may hold on 127.0.0.2 or on every address; then both
 * are tried again on a new port.
 */
export async function startCanaryAndPublic(image: Buffer): Promise<{ canary: Canary; server: PublicServer }> {
  for (let attempt = 1; ; attempt++) {
    const canary = await startCanary();
    try {
      const server = await startPublicServer({ port: canary.port, image, canaryPort: canary.port });
      return { canary, server };
    } catch (err) {
      await canary.close();
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 20) throw err;
    }
  }
}

