/**
 * The SSRF corpus: URLs a caller may send as an image URL to make Lenstack connect somewhere it
 * must not. Each is driven through every URL-taking endpoint (test/hostile/ssrf.test.ts) with a
 * loopback canary counting connections and an egress monitor recording every connect attempt.
 *
 * Tokens: {P} = the canary's port (127.0.0.1 and ::1); the "public" test server (127.0.0.2, the
 * only address the test policy treats as public) listens on the same port, so any URL that
 * slips through to loopback on {P} lands on the canary. {PUB} = http://127.0.0.2:{P}.
 * {RID} = a fresh id per request.
 *
 * `expect`: 400 = VALIDATION_FAILED (blocked as an SSRF risk, or not an acceptable URL at all);
 * 422 = IMAGE_INVALID (the URL is allowed but unusable: unreachable, not found, too many
 * redirects). Both are correct refusals; the exact one is asserted because it shows *where* the
 * URL was stopped (a 422 for a private address would mean we tried to connect).
 */

export type SsrfCategory =
  | 'reserved IPv4 ranges'
  | 'reserved IPv6 ranges'
  | 'IPv4 inside IPv6'
  | 'numeric host forms'
  | 'userinfo and parser confusion'
  | 'encoded and IDN hosts'
  | 'trailing dots and ports'
  | 'cloud metadata'
  | 'schemes'
  | 'redirects into private space'
  | 'redirect cap and dead ends'
  | 'DNS names resolving private'
  | 'controls (must succeed)';

export interface SsrfCase {
  category: SsrfCategory;
  /** The URL (with tokens), or the target of a redirect when `redirect` is set. */
  url: string;
  /** Served by the public test server: `hops - 1` plain 302s to itself, then `status` to `url`. */
  redirect?: { status: 301 | 302 | 303 | 307 | 308; hops?: number };
  expect: 400 | 422 | 200;
}

/**
 * What the test resolver answers per name (lower-cased, one trailing dot dropped, as getaddrinfo
 * does). 'system' = the machine's resolver (localhost). Any name not listed answers 127.0.0.1,
 * like a wildcard DNS such as localtest.me: every name-based URL must then be stopped by the
 * address check, not by luck of resolution. `rebind-<id>.hostile.test` answers 127.0.0.2 on its
 * first lookup and 127.0.0.1 on every later one (DNS rebinding; see the controls).
 */
export const DNS_ANSWERS: Record<string, string[] | 'ENOTFOUND' | 'system'> = {
  'loopback.hostile.test': ['127.0.0.1'],
  'loopback6.hostile.test': ['::1'],
  'both-loopbacks.hostile.test': ['127.0.0.1', '::1'],
  'public-then-private.hostile.test': ['127.0.0.2', '127.0.0.1'],
  'private-then-public.hostile.test': ['127.0.0.1', '127.0.0.2'],
  'public-and-v6-loopback.hostile.test': ['127.0.0.2', '::1'],
  'nine-public-one-private.hostile.test': ['8.8.8.8', '8.8.4.4', '1.1.1.1', '1.0.0.1', '9.9.9.9', '208.67.222.222', '208.67.220.220', '94.140.14.14', '76.76.2.0', '10.0.0.1'],
  'metadata.hostile.test': ['169.254.169.254'],
  'rfc1918.hostile.test': ['192.168.1.1'],
  'cgnat.hostile.test': ['100.64.0.1'],
  'zero.hostile.test': ['0.0.0.0'],
  'mapped.hostile.test': ['::ffff:127.0.0.1'],
  'nat64.hostile.test': ['64:ff9b::7f00:1'],
  'sixtofour.hostile.test': ['2002:7f00:1::1'],
  'ula.hostile.test': ['fd00::1'],
  'linklocal6.hostile.test': ['fe80::1'],
  'multicast.hostile.test': ['224.0.0.1'],
  'octal-answer.hostile.test': ['0177.0.0.1'],
  'no-addresses.hostile.test': [],
  'nxdomain.hostile.test': 'ENOTFOUND',
  'metadata.google.internal': ['169.254.169.254'],
  'instance-data.ec2.internal': ['169.254.169.254'],
  'sub.localhost': ['127.0.0.1'],
  localhost: 'system',
  // Controls: a name that is public on the first answer and the canary on every later one
  // (DNS rebinding): the fetch must resolve once and connect to the checked address only.
  'public.hostile.test': ['127.0.0.2'],
};

export const WILDCARD_ANSWER = ['127.0.0.1'];
export const REBIND_NAME = /^rebind-[a-z0-9-]+\.hostile\.test$/;

const c = (category: SsrfCategory, expect: 400 | 422 | 200, urls: string[]): SsrfCase[] => urls.map((url) => ({ category, url, expect }));

// Three addresses per blocked IPv4 range (first, inside, last), all on the canary's port.
const RESERVED_V4 = [
  '0.0.0.0', '0.1.2.3', '0.255.255.255', // "this network"
  '10.0.0.1', '10.128.64.32', '10.255.255.255', // RFC 1918
  '100.64.0.1', '100.100.100.100', '100.127.255.255', // CGNAT
  '127.0.0.1', '127.1.2.3', '127.255.255.254', // loopback
  '169.254.0.1', '169.254.169.254', '169.254.255.255', // link-local
  '172.16.0.1', '172.20.10.5', '172.31.255.255', // RFC 1918
  '192.0.0.1', '192.0.0.170', '192.0.0.255', // IETF protocol assignments
  '192.0.2.1', '192.0.2.128', '192.0.2.255', // TEST-NET-1
  '192.88.99.1', '192.88.99.128', '192.88.99.255', // 6to4 relay anycast
  '192.168.0.1', '192.168.100.100', '192.168.255.255', // RFC 1918
  '198.18.0.1', '198.18.200.1', '198.19.255.255', // benchmarking
  '198.51.100.1', '198.51.100.77', '198.51.100.255', // TEST-NET-2
  '203.0.113.1', '203.0.113.99', '203.0.113.255', // TEST-NET-3
  '224.0.0.1', '232.1.2.3', '239.255.255.250', // multicast
  '240.0.0.1', '250.1.2.3', '255.255.255.255', // reserved, broadcast
];

const RESERVED_V6 = [
  '::', '::1', '0:0:0:0:0:0:0:1', '0000:0000:0000:0000:0000:0000:0000:0001',
  'fc00::1', 'fd12:3456:789a::1', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', // ULA
  'fe80::1', 'fe80::1%25lo', 'febf:ffff::1', // link-local, with a zone id
  'fec0::1', // site-local
  'ff02::1', 'ff05::2', 'ff0e::1', // multicast
  '100::1', // discard
  '2001::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
  '2001:2::1', // benchmarking
  '2001:10::1', '2001:20::1', // ORCHID
  '2001:db8::1', '2001:db8:ffff::ffff', // documentation
  '3fff::1', // documentation (RFC 9637)
  '5f00::1', // SRv6
  '64:ff9b:1::1', // local-use NAT64
  '4000::1', 'e000::1', // outside 2000::/3
];

const V4_IN_V6 = [
  '::ffff:127.0.0.1', '::ffff:7f00:1', '::FFFF:7F00:0001', '0:0:0:0:0:ffff:127.0.0.1',
  '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::ffff:192.168.0.1', '::ffff:0.0.0.0',
  '::ffff:0:127.0.0.1', // IPv4-translated (RFC 6145)
  '::127.0.0.1', '::7f00:1', '::10.0.0.1', '::8.8.8.8', // IPv4-compatible: always refused
  '64:ff9b::127.0.0.1', '64:ff9b::7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b::10.0.0.1', // NAT64
  '2002:7f00:1::', '2002:7f00:0001::1', '2002:a9fe:a9fe::1', '2002:c0a8:1::1', '2002:a00:1::', // 6to4
];

// 127.0.0.1, 10.0.0.1, 169.254.169.254 and 192.168.0.1 in every legacy notation the WHATWG
// parser (and curl, and browsers) accept.
const NUMERIC_FORMS = [
  '2130706433', '0x7f000001', '0X7F000001', '017700000001', '0x7f.1', '0x7f.0.0.1', '0177.0.0.1',
  '0177.1', '127.1', '127.0.1', '0x7F.0x00.0x00.0x01', '0177.0x0.0.1', '00000177.0.0.1',
  '0x00007f.0x1', '127.000.000.001', '0x7f.0.1',
  '167772161', '0xa000001', '012.0.0.1', // 10.0.0.1
  '2852039166', '0xa9fea9fe', '0251.0376.0251.0376', '169.254.43518', // 169.254.169.254
  '3232235521', '0xc0a80001', '0300.0250.0.1', '192.168.1', // 192.168.0.1 / .0.1
  '0', '0x0', '00', // 0.0.0.0
];

export const SSRF_CORPUS: SsrfCase[] = [
  ...c('reserved IPv4 ranges', 400, RESERVED_V4.map((ip) => `http://${ip}:{P}/photo.jpg`)),
  ...c('reserved IPv6 ranges', 400, RESERVED_V6.map((ip) => `http://[${ip}]:{P}/photo.jpg`)),
  ...c('IPv4 inside IPv6', 400, V4_IN_V6.map((ip) => `http://[${ip}]:{P}/photo.jpg`)),
  ...c('numeric host forms', 400, [...NUMERIC_FORMS.map((h) => `http://${h}:{P}/photo.jpg`), 'https://2130706433:{P}/', 'http://0x7f.1/']),
  ...c('userinfo and parser confusion', 400, [
    'http://a@127.0.0.1:{P}/',
    'http://user:pass@127.0.0.1:{P}/',
    'http://:@127.0.0.1:{P}/', // empty user and password: the host still decides
    'http://example.com@127.0.0.1:{P}/',
    'http://127.0.0.2:{P}@127.0.0.1:{P}/',
    'http://127.0.0.1:{P}#@example.com/',
    'http://127.0.0.1:{P}?@example.com/',
    'http://127.0.0.1:{P}\\@example.com/', // backslash ends the authority (special schemes)
    'http://example.com%40127.0.0.1:{P}/', // percent-encoded @ in the host is not a separator
    'http://[::1]@example.com/',
    'http://user@127.0.0.2:{P}/image.png', // credentials are refused even for an allowed host
    'http://127.0.0.1:{P}%2f@example.com/',
    'http://127.0.0.1:{P};@example.com/',
    'http://127.0.0.1%09:{P}/',
  ]),
  // Parsed by WHATWG as host 127.0.0.2 (the "public" server) with a path: it is fetched, 404s.
  ...c('userinfo and parser confusion', 422, ['http://127.0.0.2:{P}\\@127.0.0.1:{P}/', 'http://127.0.0.2:{P}/@127.0.0.1:{P}/']),
  ...c('encoded and IDN hosts', 400, [
    'http://%31%32%37.0.0.1:{P}/',
    'http://%31%32%37%2e%30%2e%30%2e%31:{P}/',
    'http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11:{P}/', // full-width digits and dot
    'http://127\u30020\u30020\u30021:{P}/', // ideographic full stop
    'http://\u2460\u2461\u2466.0.0.1:{P}/', // circled digits (NFKC → 127)
    'http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54:{P}/', // full-width "localhost"
    'http://LOCALHOST:{P}/',
    'http://LocalHost:{P}/',
    'http://loc%61lhost:{P}/',
    'http://local\u00adhost:{P}/', // soft hyphen is mapped away by IDNA
    'http://127.0.0.1\u00ad:{P}/',
    'http://127.0.0\t.1:{P}/', // tabs and newlines are stripped by the URL parser
    'http://127.0.0.1\n:{P}/',
    'http://127.0.0.1%00.example.com:{P}/',
    'http://[::1%2f]:{P}/',
  ]),
  ...c('trailing dots and ports', 400, [
    'http://127.0.0.1.:{P}/',
    'http://localhost.:{P}/',
    'http://0x7f.1.:{P}/',
    'http://127.0.0.1:00{P}/', // leading zeros in the port
    'http://127.0.0.1:80/',
    'http://127.0.0.1:0/',
    'http://127.0.0.1:65535/',
    'http://127.0.0.1:65536/', // not a port: invalid URL
    'http://127.0.0.1:-1/',
    'http://127.0.0.1:{P}:{P}/',
    'https://127.0.0.1:{P}/',
    'http://[::1]:{P}/',
    'http://[::1].:{P}/',
  ]),
  ...c('cloud metadata', 400, [
    'http://169.254.169.254/latest/meta-data/',
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'http://169.254.169.254/computeMetadata/v1/?recursive=true',
    'http://169.254.169.254/metadata/instance?api-version=2021-02-01',
    'http://169.254.170.2/v2/credentials/', // ECS task credentials
    'http://100.100.100.200/latest/meta-data/', // Alibaba
    'http://192.0.0.192/latest/', // Oracle
    'http://[fd00:ec2::254]/latest/meta-data/', // AWS IMDS over IPv6
    'http://metadata.google.internal/computeMetadata/v1/',
    'http://instance-data.ec2.internal/latest/meta-data/',
    'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
    'http://0xa9fea9fe/latest/meta-data/',
  ]),
  ...c('schemes', 400, [
    'file:///etc/passwd',
    'file://127.0.0.1/etc/passwd',
    'file://localhost/etc/passwd',
    'file:///proc/self/environ',
    'ftp://127.0.0.2:{P}/image.png',
    'ftp://127.0.0.1:{P}/',
    'gopher://127.0.0.1:{P}/_GET%20/%20HTTP/1.0',
    'dict://127.0.0.1:{P}/info',
    'ldap://127.0.0.1:{P}/',
    'sftp://127.0.0.1:{P}/',
    'tftp://127.0.0.1:{P}/x',
    'ws://127.0.0.1:{P}/',
    'wss://127.0.0.2:{P}/',
    'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
    'javascript:alert(document.domain)',
    'jar:http://127.0.0.2:{P}/a.jar!/',
    'view-source:http://127.0.0.1:{P}/',
    'blob:http://127.0.0.2:{P}/0d5a2cde-6f5e-4bde-8f7c-4a8d4b1d2c3e',
    'HTTP://127.0.0.1:{P}/', // the scheme is case-insensitive: still http, still loopback
    'http:/127.0.0.1:{P}/', // one slash: still an http URL to 127.0.0.1
    'http:127.0.0.1:{P}/',
    '//127.0.0.1:{P}/', // scheme-relative: not an absolute URL
    '  http://127.0.0.1:{P}/',
    'http:\\\\127.0.0.1:{P}\\',
  ]),
  ...(['http://127.0.0.1:{P}/secret', 'http://[::1]:{P}/secret', 'http://2130706433:{P}/secret', 'http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1:{P}/', 'file:///etc/passwd', 'http://localhost:{P}/', 'http://x@127.0.0.2:{P}/image.png'] as const).flatMap((url) =>
    ([301, 302, 303, 307, 308] as const).map((status): SsrfCase => ({ category: 'redirects into private space', url, redirect: { status }, expect: 400 })),
  ),
  ...(['http://127.0.0.1:{P}/secret', 'http://[::ffff:127.0.0.1]:{P}/', 'gopher://127.0.0.1:{P}/', '//127.0.0.1:{P}/protocol-relative', 'http://loopback.hostile.test:{P}/'] as const).map(
    (url): SsrfCase => ({ category: 'redirects into private space', url, redirect: { status: 302, hops: 3 }, expect: 400 }),
  ),
  // One hop too many: refused at the cap (422) before the private target is even looked at.
  { category: 'redirect cap and dead ends', url: 'http://127.0.0.1:{P}/secret', redirect: { status: 302, hops: 4 }, expect: 422 },
  { category: 'redirect cap and dead ends', url: '{PUB}/image.png', redirect: { status: 301, hops: 4 }, expect: 422 },
  { category: 'redirect cap and dead ends', url: '{PUB}/image.png', redirect: { status: 307, hops: 10 }, expect: 422 },
  { category: 'redirect cap and dead ends', url: '{PUB}/loop', expect: 422 },
  { category: 'redirect cap and dead ends', url: '{PUB}/no-location', expect: 422 },
  { category: 'redirect cap and dead ends', url: '{PUB}/missing', expect: 422 },
  ...c('DNS names resolving private', 400, [
    'http://loopback.hostile.test:{P}/',
    'http://loopback6.hostile.test:{P}/',
    'http://both-loopbacks.hostile.test:{P}/',
    'http://public-then-private.hostile.test:{P}/image.png',
    'http://private-then-public.hostile.test:{P}/image.png',
    'http://public-and-v6-loopback.hostile.test:{P}/image.png',
    'http://nine-public-one-private.hostile.test:{P}/',
    'http://metadata.hostile.test/latest/meta-data/',
    'http://rfc1918.hostile.test:{P}/',
    'http://cgnat.hostile.test:{P}/',
    'http://zero.hostile.test:{P}/',
    'http://mapped.hostile.test:{P}/',
    'http://nat64.hostile.test:{P}/',
    'http://sixtofour.hostile.test:{P}/',
    'http://ula.hostile.test:{P}/',
    'http://linklocal6.hostile.test:{P}/',
    'http://multicast.hostile.test:{P}/',
    'http://octal-answer.hostile.test:{P}/',
    'http://localhost:{P}/',
    'http://sub.localhost:{P}/',
    'http://LOCALHOST.:{P}/',
    'http://localhost..:{P}/',
    'http://127.0.0.1..:{P}/', // not an IPv4 literal: a name, which resolves to loopback
    'http://xn--localhost-.example:{P}/',
    'http://localtest.me:{P}/',
    'http://127.0.0.1.nip.io:{P}/',
    'http://customer-bucket.s3.amazonaws.com.hostile.test:{P}/photo.jpg',
  ]),
  // A name that does not resolve is refused exactly like one resolving private: no DNS oracle.
  ...c('DNS names resolving private', 400, ['http://nxdomain.hostile.test:{P}/', 'http://no-addresses.hostile.test:{P}/']),
  // Controls prove the harness can succeed: the "public" server's image is fetched and accepted.
  ...c('controls (must succeed)', 200, ['{PUB}/image.png', 'http://public.hostile.test:{P}/image.png', 'http://rebind-{RID}.hostile.test:{P}/image.png']),
  { category: 'controls (must succeed)', url: '{PUB}/image.png', redirect: { status: 308, hops: 3 }, expect: 200 },
];
