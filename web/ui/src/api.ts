/** The console's calls to its own server (cookies ride along; same origin). */
export interface ApiError {
  status: number;
  code: string;
  message: string;
}

export class ConsoleError extends Error implements ApiError {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

export async function call<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return answerOf<T>(res);
}

/** A fresh id for one submission (crypto.randomUUID needs a secure context; this does not). */
export function newRequestId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * POST a submission under one x-request-id, sending it again with the same id while its answer is
 * lost (a dropped connection, a proxy's 502 or 504) or the server asks to come back (503 or 429,
 * after Retry-After), for
 * up to `forMs`: the server answers a resend with what the first one made, so a retry never makes
 * a second batch (docs/decisions.md, "Console batches: one request id, one batch").
 */
export async function postOnce<T>(path: string, body: unknown, requestId: string, forMs = 120_000): Promise<T> {
  const deadline = Date.now() + forMs;
  const payload = JSON.stringify(body);
  for (let attempt = 0; ; attempt++) {
    const backoff = Math.min(8_000, 500 * 2 ** attempt);
    let res: Response;
    try {
      res = await fetch(path, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json', 'x-request-id': requestId }, body: payload });
    } catch {
      if (Date.now() + backoff >= deadline) throw new ConsoleError(0, 'NETWORK', 'The server could not be reached. Press the button again: the same submission is recognised, never started twice.');
      await pause(backoff);
      continue;
    }
    // 502 and 504 are a proxy's word that the answer was lost: as safe to send again as the rest.
    if ([429, 502, 503, 504].includes(res.status) && Date.now() < deadline) {
      const after = Number(res.headers.get('retry-after'));
      const wait = Number.isFinite(after) && after > 0 ? Math.min(30_000, after * 1000) : backoff;
      if (Date.now() + wait < deadline) {
        await res.arrayBuffer();
        await pause(wait);
        continue;
      }
    }
    try {
      return await answerOf<T>(res);
    } catch (err) {
      if (err instanceof ConsoleError) throw err;
      // Not our JSON (a proxy's error page): what happened is unknown, and pressing again is safe.
      throw new ConsoleError(res.status, 'UNKNOWN', `The server answered ${res.status} without saying what happened. Press the button again: the same submission is recognised, never started twice.`);
    }
  }
}

async function answerOf<T>(res: Response): Promise<T> {
  const text = await res.text();
  const json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  if (!res.ok) {
    // Our envelope ({ error: { code, message } }) or better-auth's ({ code, message }).
    const e = (json.error as { code?: string; message?: string } | undefined) ?? (json as { code?: string; message?: string });
    throw new ConsoleError(res.status, e.code ?? String(res.status), e.message ?? `Request failed (${res.status})`);
  }
  return json as T;
}

export interface Workspace {
  id: string;
  name: string;
  role: 'owner' | 'admin' | 'member';
  kind: 'personal' | 'team';
}

export interface SessionInfo {
  user: { id: string; email: string; name: string };
  workspaces: Workspace[];
}

export interface KeyListing {
  id: string;
  kind: 'live' | 'test';
  name: string | null;
  prefix: string;
  last4: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface Credits {
  balance: { community: number; purchased: number; reserved: number };
  ledger: Array<{ at: string; kind: string; credits: number; charged: number; note: string | null }>;
  usage: Array<{ day: string; charged: number }>;
  card: { onFileSince: string | null; offer: boolean };
}

export interface CaughtMail {
  id: number;
  receivedAt: string;
  to: string[];
  subject: string;
  text: string;
}

export interface BatchSummary {
  id: string;
  kind: 'photos' | 'vehicles';
  status: 'running' | 'paused' | 'cancelled' | 'completed';
  pauseReason: 'requested' | 'credits' | null;
  counts: { total: number; done: number; failed: number; pending: number };
  creditsCharged: number;
  etaSeconds: number | null;
  createdAt: string;
}
