/**
 * Which buckets a request counts against (docs/contract.md "Limits", "Authentication" 4). Pure: the plugin
 * hands in who is calling and on which route, the limiter does the counting.
 */

export interface Policy {
  /** Names the limit in messages and logs. */
  name: string;
  limit: number;
  windowMs: number;
  /** What is counted and per what, for the 429 message. */
  counts: string;
  per: string;
}

export interface Bucket extends Policy {
  /** Full Redis key (prefix included). */
  key: string;
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

export const POLICIES = {
  user: { name: 'user', limit: 600, windowMs: MINUTE, counts: 'requests', per: 'user' },
  lookup: { name: 'lookup', limit: 300, windowMs: MINUTE, counts: 'lookup requests', per: 'API key' },
  anonymousMinute: { name: 'anonymous-minute', limit: 2, windowMs: MINUTE, counts: 'requests', per: 'IP address with the anonymous sandbox key' },
  // A rolling 24 hours, not a calendar day: no midnight burst of 20, and Retry-After stays exact.
  anonymousDay: { name: 'anonymous-day', limit: 10, windowMs: DAY, counts: 'requests', per: 'IP address with the anonymous sandbox key' },
  /**
   * Brute-force guard: failed key authentications per client IP. Keys carry ~238 bits, so this is
   * not what keeps them secret; it keeps one address from turning Postgres into its sparring
   * partner. Generous, so a misconfigured client behind a shared NAT does not lock its neighbours out.
   */
  authFailures: { name: 'auth-failures', limit: 300, windowMs: 10 * MINUTE, counts: 'failed authentications', per: 'IP address' },
  /**
   * Failed internal-secret attempts per client IP. Only a misconfigured server ever fails, so this
   * is tight; once over it, even the right secret is refused from that IP (else a correct guess
   * would stand out from the 429s).
   */
  internalSecretFailures: { name: 'internal-secret-failures', limit: 30, windowMs: 10 * MINUTE, counts: 'failed internal-secret attempts', per: 'IP address' },
} as const satisfies Record<string, Policy>;

/** Both lookup endpoints share one route URL. */
export const LOOKUP_ROUTE = '/v2/lookup';

export interface Caller {
  accountId: string | null;
  keyHash: string;
  anonymous: boolean;
  /** A svc_test_ key: fixtures only, counted apart from the account's live traffic. */
  sandbox: boolean;
}

/**
 * Keys use a Redis Cluster hash tag ({...}) per subject, so the buckets of one request always sit
 * in one slot and the single script can touch them all.
 */
export function bucketsFor(
  prefix: string,
  caller: Caller,
  routeUrl: string | undefined,
  clientIpBucket: () => string,
): Bucket[] {
  if (caller.anonymous || caller.accountId === null) {
    // The anonymous key is one public key shared by everyone: its only meaningful subject is the IP.
    const ip = clientIpBucket();
    return [
      { ...POLICIES.anonymousMinute, key: `${prefix}rl:{ip:${ip}}:anon:m` },
      { ...POLICIES.anonymousDay, key: `${prefix}rl:{ip:${ip}}:anon:d` },
    ];
  }
  const account = `${prefix}rl:{u:${caller.accountId}}`;
  // A test loop on a sandbox key must not eat the budget of the same account's production traffic.
  const buckets: Bucket[] = [{ ...POLICIES.user, key: caller.sandbox ? `${account}:sandbox` : `${account}:all` }];
  if (routeUrl === LOOKUP_ROUTE) buckets.push({ ...POLICIES.lookup, key: `${account}:lookup:${caller.keyHash}` });
  return buckets;
}

export function authFailureBucket(prefix: string, ipBucket: string): Bucket {
  return { ...POLICIES.authFailures, key: `${prefix}rl:{ip:${ipBucket}}:authfail` };
}

export function internalSecretFailureBucket(prefix: string, ipBucket: string): Bucket {
  return { ...POLICIES.internalSecretFailures, key: `${prefix}rl:{ip:${ipBucket}}:internalfail` };
}
