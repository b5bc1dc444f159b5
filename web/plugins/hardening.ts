import { isIP } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * Small defences of the console's server (issue 21's "small ones"; docs/reliability.md
 * "The console's small holes"), kept here so web/app.ts only wires them in (registerHardeningHeaders).
 * (The newest-sign-in-link rule is SQL over better-auth's table: accounts/console-people.ts.)
 */

/**
 * The console's pages load only their own hashed scripts and styles (Vite emits no inline code),
 * talk only to their own origin (fetch, EventSource, tus uploads), and are framed by nobody. The
 * favicon is a `data:` URL. Navigations elsewhere (Stripe Checkout, GitHub, Google) are not fetches
 * and stay allowed.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // One style attribute and no other: the one Chartist (the Usage chart) sets on its <svg>,
  // "width: 100%; height: 100%;", allowed by its hash (docs/decisions.md, the console's sections).
  "style-src-attr 'unsafe-hashes' 'sha256-7QjiizGaIV/0HdTo3IYJW3cdwZC5lF69KZWWFmTz8Gw='",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "object-src 'none'",
].join('; ');

/**
 * The request as the console logs it: the path only. Query strings carry magic-link tokens,
 * verification JWTs, OAuth codes and invitation tokens; none of them belongs in a log.
 */
export function redactedRequest(req: { method?: string; url?: string; hostname?: string; ip?: string; socket?: { remotePort?: number } }) {
  const url = req.url ?? '';
  const at = url.indexOf('?');
  return {
    method: req.method,
    url: at === -1 ? url : `${url.slice(0, at)}?[redacted]`,
    host: req.hostname,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/**
 * better-auth answers sign-in, get-session and list-sessions with the session token in the JSON
 * body. The token is the session: a script that reads a response (an XSS, a browser extension, a
 * log of response bodies) would own the session although the cookie is httpOnly. It travels in
 * the cookie only; every `token` property of better-auth's JSON answers is dropped.
 */
export function withoutTokens(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutTokens);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (k !== 'token') out[k] = withoutTokens(v);
    return out;
  }
  return value;
}

/** 127.0.0.0/8, ::1 and `localhost`: a server bound there is reachable from this machine only. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h === '0:0:0:0:0:0:0:1';
  return false;
}

/**
 * Every answer names its request id and carries the console's hardening headers: no MIME sniffing,
 * the referrer kept to this origin, never framed, and the content security policy above.
 */
export function registerHardeningHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'same-origin');
    reply.header('x-frame-options', 'DENY');
    reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
  });
}
