import { pick, rngFor } from '../../samples/random.ts';

/**
 * A signed-in person using the console while the faults fire (docs/reliability.md "Chaos"): their
 * session, workspace credits and batches, account page, better-auth's own session route, and now
 * and then a password sign-in, on whichever console replica is up. The consoles reach Postgres and
 * Redis through the run's fault proxies, so these meet resets, stalls and the Postgres restarts.
 * Each answer must be a 2xx, or 503 with Retry-After: never a 500, never a hang, and never a 401
 * for a session that is valid (a database that did not answer is not "signed out").
 */

export interface ProbeAttempt {
  route: string;
  from: number;
  to: number;
  status?: number;
  retryAfter?: string | null;
  network?: string;
  body?: string;
}

export interface ConsolePerson {
  cookie: string;
  workspaceId: string;
  email: string;
  password: string;
}

const TIMEOUT_MS = 30_000;

function routes(person: ConsolePerson): Array<{ route: string; path: string; method?: 'POST'; body?: unknown }> {
  const ws = `/api/v1/workspaces/${person.workspaceId}`;
  return [
    { route: 'GET session', path: '/api/v1/session' },
    { route: 'GET credits', path: `${ws}/credits` },
    { route: 'GET batches', path: `${ws}/batches` },
    { route: 'GET account/security', path: '/api/v1/account/security' },
    { route: 'GET auth/get-session', path: '/api/v1/auth/get-session' },
    { route: 'POST auth/sign-in/email', path: '/api/v1/auth/sign-in/email', method: 'POST', body: { email: person.email, password: person.password } },
  ];
}

/** One probe: the answer's status (and Retry-After), or the connection failure. */
export async function probeOnce(base: string, person: ConsolePerson, r: ReturnType<typeof routes>[number]): Promise<ProbeAttempt> {
  const a: ProbeAttempt = { route: r.route, from: Date.now(), to: 0 };
  try {
    const res = await fetch(`${base}${r.path}`, {
      method: r.method ?? 'GET',
      headers: {
        cookie: person.cookie,
        origin: base,
        'sec-fetch-site': 'same-origin',
        ...(r.body ? { 'content-type': 'application/json' } : {}),
      },
      ...(r.body ? { body: JSON.stringify(r.body) } : {}),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await res.text();
    a.status = res.status;
    if (res.status >= 400) a.body = text.slice(0, 300);
    if (res.status === 503 || res.status === 429) a.retryAfter = res.headers.get('retry-after');
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    a.network = e.name === 'TimeoutError' || e.name === 'AbortError' ? 'client timeout' : (e.cause?.code ?? e.cause?.message ?? e.message);
  }
  a.to = Date.now();
  return a;
}

/** Probe until `stopped()`, one request at a time per loop, every 200–700 ms. */
export async function probeConsoles(opts: {
  seed: string;
  loops: number;
  bases: () => string[];
  person: ConsolePerson;
  stopped: () => boolean;
}): Promise<ProbeAttempt[]> {
  const out: ProbeAttempt[] = [];
  const all = routes(opts.person);
  const signIn = all[all.length - 1]!;
  const reads = all.slice(0, -1);
  await Promise.all(
    Array.from({ length: opts.loops }, async (_, loop) => {
      const rng = rngFor(`${opts.seed}|console-probe|${loop}`);
      while (!opts.stopped()) {
        const bases = opts.bases();
        if (bases.length) out.push(await probeOnce(pick(rng, bases), opts.person, rng() < 0.03 ? signIn : pick(rng, reads)));
        await new Promise((r) => setTimeout(r, 200 + Math.floor(rng() * 500)));
      }
    }),
  );
  return out;
}

/** The probes' verdict: failures (500s, hangs, 503 without Retry-After, 401 for a valid session) and a summary line. */
export function judgeProbes(probes: ProbeAttempt[]): { failures: string[]; line: string; byStatus: Record<string, number> } {
  const by: Record<string, number> = {};
  const bad5xx: ProbeAttempt[] = [];
  const noRetryAfter: ProbeAttempt[] = [];
  const hangs: ProbeAttempt[] = [];
  const signedOut: ProbeAttempt[] = [];
  for (const a of probes) {
    const label = a.status ? String(a.status) : (a.network ?? '?');
    by[label] = (by[label] ?? 0) + 1;
    if (a.status && a.status >= 500 && a.status !== 503) bad5xx.push(a);
    if (a.status === 503 && !a.retryAfter) noRetryAfter.push(a);
    if (a.network === 'client timeout') hangs.push(a);
    if (a.status === 401) signedOut.push(a);
  }
  const show = (xs: ProbeAttempt[]) => xs.slice(0, 4).map((a) => `${a.route} ${a.status ?? a.network}${a.body ? ` ${a.body.slice(0, 160)}` : ''}`).join('; ');
  const failures: string[] = [];
  if (bad5xx.length) failures.push(`${bad5xx.length} console answer(s) 5xx other than 503: ${show(bad5xx)}`);
  if (noRetryAfter.length) failures.push(`${noRetryAfter.length} console 503(s) without Retry-After: ${show(noRetryAfter)}`);
  if (hangs.length) failures.push(`${hangs.length} console request(s) unanswered within ${TIMEOUT_MS} ms: ${show(hangs)}`);
  if (signedOut.length) failures.push(`${signedOut.length} console answer(s) 401 for a valid session: ${show(signedOut)}`);
  const fmt = Object.entries(by).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  return { failures, byStatus: by, line: `console person (through the fault proxies): ${probes.length} requests (${fmt})` };
}
