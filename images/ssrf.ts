import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { validationFailed } from '../core/errors.ts';

/**
 * Server-side request forgery guard for image URLs: which URLs and addresses we may connect to.
 * The fetcher (fetch.ts) resolves a host once here, checks every address, then connects only to
 * those checked addresses (see `pinnedLookup`), so a second DNS answer can never be used.
 */

/** The contract's wording for a refused host (400 VALIDATION_FAILED). */
export const SSRF_BLOCKED_MESSAGE = 'Image URL host blocked as server-side request forgery risk';

/** The one answer for a host name that does not resolve, or resolves to any non-public address (400 VALIDATION_FAILED). */
export const UNRESOLVABLE_MESSAGE = 'Image URL host does not resolve to a public address';

/** A dns.lookup-compatible resolver, called with `all: true`. */
export type LookupFn = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void,
) => void;

export type AddressPolicy = (ip: string) => boolean;

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];
const cidrs = (list: string[]): Cidr[] => list.map((c) => ipaddr.parseCIDR(c));

// IANA IPv4 special-purpose registry entries that are not globally reachable, plus multicast and
// 240/4. AS112 (192.31.196/24, 192.175.48/24) and AMT (192.52.193/24) are globally reachable
// per IANA and stay allowed.
const BLOCKED_V4 = cidrs([
  '0.0.0.0/8', // "this network", includes 0.0.0.0 unspecified
  '10.0.0.0/8', // RFC 1918
  '100.64.0.0/10', // RFC 6598 carrier-grade NAT
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local, includes cloud metadata 169.254.169.254
  '172.16.0.0/12', // RFC 1918
  '192.0.0.0/24', // IETF protocol assignments (DS-Lite, NAT64 discovery)
  '192.0.2.0/24', // TEST-NET-1 documentation
  '192.88.99.0/24', // deprecated 6to4 relay anycast (RFC 7526)
  '192.168.0.0/16', // RFC 1918
  '198.18.0.0/15', // benchmarking (RFC 2544)
  '198.51.100.0/24', // TEST-NET-2
  '203.0.113.0/24', // TEST-NET-3
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, includes 255.255.255.255 broadcast
]);

// Only global unicast 2000::/3 can be public; inside it these are not.
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
const BLOCKED_V6 = cidrs([
  '2001::/23', // IETF protocol assignments: Teredo, benchmarking, ORCHID…
  '2001:db8::/32', // documentation
  '3fff::/20', // documentation (RFC 9637)
]);
// Forms that carry an IPv4 address in their low bits: judged by that IPv4 address.
const V4_MAPPED = ipaddr.parseCIDR('::ffff:0:0/96');
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');

const inAny = (addr: ipaddr.IPv4 | ipaddr.IPv6, list: Cidr[]) => list.some((c) => addr.kind() === c[0].kind() && addr.match(c));

function isPublicV4(addr: ipaddr.IPv4): boolean {
  return !inAny(addr, BLOCKED_V4);
}

function isPublicV6(addr: ipaddr.IPv6): boolean {
  const p = addr.parts;
  if (addr.match(V4_MAPPED) || addr.match(NAT64_WELL_KNOWN)) {
    return isPublicV4(new ipaddr.IPv4([p[6]! >> 8, p[6]! & 0xff, p[7]! >> 8, p[7]! & 0xff]));
  }
  if (addr.match(SIX_TO_FOUR)) {
    return isPublicV4(new ipaddr.IPv4([p[1]! >> 8, p[1]! & 0xff, p[2]! >> 8, p[2]! & 0xff]));
  }
  // Everything outside 2000::/3 is denied by default: ::/96 (IPv4-compatible, ::, ::1), ULA fc00::/7,
  // link-local fe80::/10, site-local fec0::/10, multicast ff00::/8, 64:ff9b:1::/48, 100::/64, 5f00::/16.
  return addr.match(GLOBAL_UNICAST_V6) && !inAny(addr, BLOCKED_V6);
}

/**
 * True only for a canonical IPv4 dotted quad or IPv6 literal that is globally reachable unicast.
 * Anything unparsable, or written in a legacy form (octal, hex, short dotted), is not public.
 */
export function isPublicAddress(ip: string): boolean {
  const family = net.isIP(ip);
  if (family === 4) {
    // net.isIP accepts only strict dotted decimal; ipaddr alone would also accept 0177.0.0.1.
    return isPublicV4(ipaddr.IPv4.parse(ip));
  }
  if (family === 6) {
    const addr = parseV6(ip);
    return addr !== null && isPublicV6(addr);
  }
  return false;
}

function parseV6(ip: string): ipaddr.IPv6 | null {
  // ipaddr.js reads '::a.b.c.d' as '::ffff:a.b.c.d' (mapped, not compatible); the WHATWG
  // serialisation has no dotted tail, so parse that. Zone ids (fe80::1%eth0) do not parse: refused.
  try {
    return ipaddr.IPv6.parse(new URL(`http://[${ip}]/`).hostname.slice(1, -1));
  } catch {
    return null;
  }
}

/**
 * Parses and vets a URL string before any network work: http/https only, no userinfo.
 * WHATWG parsing normalises 2130706433, 0x7f.1 and 0177.0.0.1 to 127.0.0.1, so the normalised
 * `hostname` is what gets checked and what we connect to.
 */
export function parseImageUrl(raw: string, base?: URL): URL {
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    throw validationFailed('Image URL is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw validationFailed(`${SSRF_BLOCKED_MESSAGE}: only http and https URLs are fetched`);
  }
  // Credentials never belong in an image URL, and `user@host` is a classic filter-confusion trick.
  if (url.username !== '' || url.password !== '') {
    throw validationFailed(`${SSRF_BLOCKED_MESSAGE}: URLs with credentials are refused`);
  }
  if (url.hostname === '') throw validationFailed('Image URL has no host');
  return url;
}

/** The host of a parsed URL as an address literal or a DNS name (IPv6 brackets removed). */
export function urlHost(url: URL): { host: string; isLiteral: boolean } {
  const h = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { host: h, isLiteral: net.isIP(h) !== 0 };
}

function lookupAll(lookup: LookupFn, host: string): Promise<dns.LookupAddress[]> {
  return new Promise((resolve, reject) => {
    lookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });
}

/**
 * Every address the URL's host stands for, each one allowed by the policy; refuses the whole
 * host if any single address is not (a name answering both public and private is hostile).
 * Both refusals are 400; a name's never says whether it exists.
 */
export async function resolveAllowed(
  url: URL,
  opts: { allowAddress: AddressPolicy; lookup: LookupFn },
): Promise<dns.LookupAddress[]> {
  const { host, isLiteral } = urlHost(url);
  if (isLiteral) {
    if (!opts.allowAddress(host)) throw validationFailed(SSRF_BLOCKED_MESSAGE);
    return [{ address: host, family: net.isIP(host) }];
  }
  // A name that does not resolve and a name that resolves to an internal address get the very
  // same answer, so callers cannot use us to map which internal names exist.
  const addresses = await lookupAll(opts.lookup, host).catch(() => []);
  if (addresses.length === 0 || !addresses.every((a) => opts.allowAddress(a.address))) throw validationFailed(UNRESOLVABLE_MESSAGE);
  return addresses;
}

/**
 * A lookup for http(s).request that answers only with already-checked addresses, so the socket
 * connects where we checked (DNS-rebinding safe) while Host and TLS SNI keep the real name.
 */
export function pinnedLookup(addresses: readonly dns.LookupAddress[]): net.LookupFunction {
  return (_hostname, options, callback) => {
    const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
    const list = wanted.length > 0 ? wanted : addresses;
    if (options.all) {
      callback(null, [...list]);
    } else {
      callback(null, list[0]!.address, list[0]!.family);
    }
  };
}
