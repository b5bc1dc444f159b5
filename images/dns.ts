import { Resolver, type LookupAddress } from 'node:dns';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { Limiter } from '../core/limiter.ts';
import type { LookupFn } from './ssrf.ts';

/**
 * Name resolution for image URLs, off libuv's thread pool: dns.lookup (getaddrinfo) holds one of
 * the pool's 4 threads for as long as a DNS server stays silent, and sharp and file I/O share
 * that pool, so a few URLs with unanswered names would stall every request. c-ares (a
 * dns.Resolver) queries over sockets on the event loop instead, with its own timeout and tries;
 * hosts(5) is read here since c-ares does not consult it. Lookups in flight are bounded, and a
 * lookup waiting for its turn gives up at the same deadline as one that is running.
 */

export interface ResolverOptions {
  /** DNS servers, `ip` or `ip:port`; absent = the system's (resolv.conf). */
  servers?: string[];
  /** First try's timeout per query, in ms (c-ares backs off on later tries). */
  timeoutMs?: number;
  /** Tries per query and server. */
  tries?: number;
  /** Whole lookup (waiting for a slot included) answers within this, in ms. */
  deadlineMs?: number;
  /** Lookups querying DNS at once; more wait for a slot. */
  maxInFlight?: number;
  /** hosts(5) text consulted before DNS; absent = /etc/hosts. */
  hosts?: string;
}

export const DNS_DEFAULTS = { timeoutMs: 1_500, tries: 2, deadlineMs: 5_000, maxInFlight: 64 } as const;

/** The error a lookup fails with; `code` is c-ares' (ENOTFOUND, ETIMEOUT, …) or ours. */
export class DnsError extends Error {
  override name = 'DnsError';
  constructor(
    readonly code: string,
    hostname: string,
  ) {
    super(`${code} ${hostname}`);
  }
}

/** name → addresses from hosts(5) text; names are case-insensitive, the first line naming one wins per family. */
export function parseHosts(text: string): Map<string, LookupAddress[]> {
  const map = new Map<string, LookupAddress[]>();
  for (const line of text.split('\n')) {
    const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
    const family = address ? net.isIP(address) : 0;
    if (family === 0) continue;
    for (const name of names) {
      const key = name.toLowerCase();
      const list = map.get(key) ?? [];
      if (!list.some((a) => a.address === address)) list.push({ address: address!, family });
      map.set(key, list);
    }
  }
  return map;
}

function systemHosts(): string {
  try {
    return readFileSync('/etc/hosts', 'utf8');
  } catch {
    return '';
  }
}

/** Resolves a name to its IPv4 and IPv6 addresses: hosts(5) first, then DNS through c-ares. */
export function createResolver(opts: ResolverOptions = {}): (hostname: string) => Promise<LookupAddress[]> {
  const resolver = new Resolver({ timeout: opts.timeoutMs ?? DNS_DEFAULTS.timeoutMs, tries: opts.tries ?? DNS_DEFAULTS.tries });
  if (opts.servers) resolver.setServers(opts.servers);
  const deadlineMs = opts.deadlineMs ?? DNS_DEFAULTS.deadlineMs;
  const slots = new Limiter(opts.maxInFlight ?? DNS_DEFAULTS.maxInFlight);
  let hosts: Map<string, LookupAddress[]> | undefined;

  const query = (type: 'A' | 'AAAA', name: string) =>
    new Promise<LookupAddress[]>((resolve, reject) => {
      const done = (err: NodeJS.ErrnoException | null, addresses: string[]) =>
        err ? reject(err) : resolve(addresses.map((address) => ({ address, family: type === 'A' ? 4 : 6 })));
      if (type === 'A') resolver.resolve4(name, done);
      else resolver.resolve6(name, done);
    });

  return async (hostname) => {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    hosts ??= parseHosts(opts.hosts ?? systemHosts());
    const listed = hosts.get(name);
    if (listed) return [...listed];

    // A lookup still waiting for a slot at the deadline leaves the queue. One that got a slot holds
    // it until c-ares itself is done (its own timeout bounds that), so the bound counts real
    // queries; the caller stops waiting at the deadline either way.
    const deadline = AbortSignal.timeout(deadlineMs);
    const answers = slots.run(() => Promise.allSettled([query('A', name), query('AAAA', name)]), deadline);
    const settled = await new Promise<Awaited<typeof answers> | null>((resolve) => {
      const onAbort = () => resolve(null);
      if (deadline.aborted) return onAbort();
      deadline.addEventListener('abort', onAbort, { once: true });
      answers.then(
        (r) => (deadline.removeEventListener('abort', onAbort), resolve(r)),
        () => resolve(null), // left the queue at the deadline
      );
    });
    if (settled === null) throw new DnsError('ETIMEOUT', name);
    const addresses = settled.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
    if (addresses.length > 0) return addresses;
    const failure = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    const code = (failure?.reason as NodeJS.ErrnoException | undefined)?.code ?? 'ENOTFOUND';
    // One family answering "no such record" while the other found none is a plain miss.
    throw new DnsError(code === 'ENODATA' ? 'ENOTFOUND' : code, name);
  };
}

/** createResolver as a dns.lookup-compatible function (`all: true`), for the fetcher's policy. */
export function resolverLookup(opts: ResolverOptions = {}): LookupFn {
  const resolve = createResolver(opts);
  return (hostname, _options, callback) => {
    resolve(hostname).then(
      (addresses) => callback(null, addresses),
      (err: NodeJS.ErrnoException) => callback(err, []),
    );
  };
}

let processLookup: LookupFn | undefined;
/** This process's resolver on the system's DNS servers, made on first use. */
export function defaultLookup(): LookupFn {
  processLookup ??= resolverLookup();
  return processLookup;
}
