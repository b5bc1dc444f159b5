import ipaddr from 'ipaddr.js';

export type Address = ipaddr.IPv4 | ipaddr.IPv6;
export type TrustedProxies = ReadonlyArray<readonly [Address, number]>;

/** IPv4-mapped IPv6 (::ffff:1.2.3.4, what a dual-stack socket reports) counts as the IPv4 address. */
function unmapped(addr: Address): Address {
  return addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() ? (addr as ipaddr.IPv6).toIPv4Address() : addr;
}

/**
 * One address as proxies write it: dotted-quad IPv4 or IPv6, optionally with a port
 * (1.2.3.4:80, [2001:db8::1]:443). Anything else (hostnames, "unknown", octal or short IPv4
 * forms that parsers disagree on) is not an address.
 */
export function parseAddress(raw: string): Address | null {
  let s = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(s);
  if (bracketed) s = bracketed[1]!;
  else {
    const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(s);
    if (v4WithPort) s = v4WithPort[1]!;
  }
  if (ipaddr.IPv4.isValidFourPartDecimal(s)) return ipaddr.IPv4.parse(s);
  if (ipaddr.IPv6.isValid(s)) return unmapped(ipaddr.IPv6.parse(s));
  return null;
}

/** TRUSTED_PROXIES: comma-separated IPs and CIDR ranges. A typo fails startup instead of trusting nobody quietly. */
export function parseTrustedProxies(spec: string): TrustedProxies {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry): readonly [Address, number] => {
      if (entry.includes('/')) {
        if (!ipaddr.isValidCIDR(entry)) throw new Error(`TRUSTED_PROXIES: "${entry}" is not a CIDR range`);
        const [addr, bits] = ipaddr.parseCIDR(entry);
        if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
          return [(addr as ipaddr.IPv6).toIPv4Address(), bits - 96];
        }
        return [addr, bits];
      }
      const addr = parseAddress(entry);
      if (!addr) throw new Error(`TRUSTED_PROXIES: "${entry}" is not an IP address`);
      return [addr, addr.kind() === 'ipv4' ? 32 : 128];
    });
}

export function isTrusted(addr: Address, trusted: TrustedProxies): boolean {
  return trusted.some(([range, bits]) => range.kind() === addr.kind() && addr.match(range, bits));
}

/**
 * The client's address: the socket peer, unless the peer is a trusted proxy; then X-Forwarded-For
 * is walked from the right (each proxy appends the address it received from), skipping trusted
 * proxies, and the first address not in TRUSTED_PROXIES is the client. Everything left of it was
 * written by the client and is ignored. An unparsable hop ends the walk at the last address a
 * trusted proxy vouched for, so garbage can never pick someone else's bucket.
 */
export function clientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | string[] | undefined,
  trusted: TrustedProxies,
): Address | null {
  const peer = socketAddress === undefined ? null : parseAddress(socketAddress);
  if (!peer || !isTrusted(peer, trusted)) return peer;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : (forwardedFor ?? '')).split(',');
  let client: Address = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!.trim();
    if (hop === '') continue;
    const addr = parseAddress(hop);
    if (!addr) break;
    client = addr;
    if (!isTrusted(addr, trusted)) break;
  }
  return client;
}

/**
 * The rate-limit subject for an address: IPv4 as is, IPv6 by its /64, because one subscriber
 * usually gets a whole /64 and can pick a fresh address in it for every request.
 */
export function ipBucket(addr: Address | null): string {
  if (!addr) return 'unknown';
  if (addr.kind() === 'ipv4') return addr.toString();
  const parts = (addr as ipaddr.IPv6).parts;
  return `${new ipaddr.IPv6([...parts.slice(0, 4), 0, 0, 0, 0]).toString()}/64`;
}
