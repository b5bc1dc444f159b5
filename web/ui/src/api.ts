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
