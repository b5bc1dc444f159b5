import net from 'node:net';
import type { Rng } from '../../samples/random.ts';

/**
 * A small TCP proxy that breaks connections on purpose (node:net only, loopback only). The API and
 * the workers reach Postgres and Redis through one each, so a chaos run can reset or stall their
 * connections mid-query. Faults are drawn from a seeded stream; with faults off it only forwards.
 */

export interface Faults {
  /** Resets (TCP RST to both sides) of a random open connection per second, on average. */
  resetPerSecond: number;
  /** Stalls (both directions paused) of a random open connection per second, on average. */
  stallPerSecond: number;
  /** Length of one stall, drawn in [min, max] ms. */
  stallMs: [number, number];
  /** Share of new connections reset at once, before they reach the server. */
  acceptResetRate: number;
}

export interface FaultProxyStats {
  accepted: number;
  open: number;
  /** Connections we reset mid-life. */
  resets: number;
  /** New connections reset before reaching the server. */
  acceptResets: number;
  stalls: number;
  /** Upstream connections that failed or ended with an error we did not cause. */
  upstreamErrors: number;
}

interface Link {
  id: number;
  client: net.Socket;
  upstream: net.Socket;
  stalled: boolean;
}

/** Faults are drawn this often; each tick is one Bernoulli draw per fault kind. */
const TICK_MS = 50;
/** No single stall outlasts this, whatever the plan says (every wait here is bounded). */
const MAX_STALL_MS = 10_000;

export class FaultProxy {
  private readonly links = new Map<number, Link>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private nextId = 0;
  private faults: Faults | null = null;
  private ticker: NodeJS.Timeout | undefined;
  private readonly counts = { accepted: 0, resets: 0, acceptResets: 0, stalls: 0, upstreamErrors: 0 };

  private constructor(
    readonly name: string,
    private readonly server: net.Server,
    readonly port: number,
    private readonly target: { host: string; port: number },
    private readonly rng: Rng,
  ) {}

  /** Listen on 127.0.0.1 (a free port unless given) and forward to `target`. */
  static async start(opts: { name: string; target: { host: string; port: number }; rng: Rng; port?: number }): Promise<FaultProxy> {
    const server = net.createServer({ noDelay: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const port = (server.address() as net.AddressInfo).port;
    const proxy = new FaultProxy(opts.name, server, port, opts.target, opts.rng);
    server.on('connection', (socket) => proxy.accept(socket));
    return proxy;
  }

  /** `url` with its host and port replaced by this proxy's (credentials, path and query kept). */
  proxiedUrl(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  /** Start (or change) fault injection; `null` stops it (stalls under way still end on time). */
  setFaults(faults: Faults | null): void {
    this.faults = faults;
    if (faults && !this.ticker) {
      this.ticker = setInterval(() => this.tick(), TICK_MS);
      this.ticker.unref();
    } else if (!faults && this.ticker) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  stats(): FaultProxyStats {
    return { ...this.counts, open: this.links.size };
  }

  /** Stop listening and drop every connection. */
  async close(): Promise<void> {
    this.setFaults(null);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const link of this.links.values()) {
      link.client.destroy();
      link.upstream.destroy();
    }
    this.links.clear();
    await closed;
  }

  private accept(client: net.Socket): void {
    this.counts.accepted++;
    client.on('error', () => {});
    if (this.faults && this.rng() < this.faults.acceptResetRate) {
      this.counts.acceptResets++;
      client.resetAndDestroy();
      return;
    }
    client.pause();
    const upstream = net.connect({ host: this.target.host, port: this.target.port, noDelay: true });
    const link: Link = { id: this.nextId++, client, upstream, stalled: false };
    this.links.set(link.id, link);
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      this.links.delete(link.id);
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', () => {
      this.counts.upstreamErrors++;
      finish();
    });
    client.on('close', finish);
    upstream.on('close', finish);
    upstream.once('connect', () => {
      // Forward by hand (not pipe) so a stall can hold both directions and release them later.
      const forward = (from: net.Socket, to: net.Socket) => {
        from.on('data', (chunk) => {
          if (!to.write(chunk)) from.pause();
        });
        to.on('drain', () => {
          if (!link.stalled) from.resume();
        });
        from.on('end', () => to.end());
      };
      forward(client, upstream);
      forward(upstream, client);
      if (!link.stalled) client.resume();
    });
  }

  private tick(): void {
    const f = this.faults;
    if (!f || this.links.size === 0) return;
    const perTick = TICK_MS / 1000;
    if (this.rng() < f.resetPerSecond * perTick) {
      const link = this.pickLink();
      if (link) {
        this.counts.resets++;
        this.links.delete(link.id);
        // RST both ways: the service sees ECONNRESET, the server sees its peer vanish mid-session.
        link.client.resetAndDestroy();
        link.upstream.resetAndDestroy();
      }
    }
    if (this.rng() < f.stallPerSecond * perTick) {
      const link = this.pickLink((l) => !l.stalled);
      if (link) {
        this.counts.stalls++;
        link.stalled = true;
        link.client.pause();
        link.upstream.pause();
        const [lo, hi] = f.stallMs;
        const ms = Math.min(MAX_STALL_MS, Math.round(lo + this.rng() * Math.max(0, hi - lo)));
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          link.stalled = false;
          if (!link.client.destroyed) link.client.resume();
          if (!link.upstream.destroyed) link.upstream.resume();
        }, ms);
        this.timers.add(timer);
      }
    }
  }

  private pickLink(filter: (l: Link) => boolean = () => true): Link | undefined {
    const candidates = [...this.links.values()].filter((l) => filter(l) && l.upstream.readyState === 'open');
    return candidates[Math.floor(this.rng() * candidates.length)];
  }
}
