import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import Provider from 'oidc-provider';
import { freePort } from '../../../tools/scripts/temporal.ts';

/**
 * Google for the console's tests: a real OpenID provider (panva's oidc-provider, certified) on
 * loopback, with discovery, PKCE, signed ID tokens and its development login and consent pages.
 * The login name typed on its page picks the account; the test says which address (verified or
 * not) each login has.
 */
export interface GoogleStub {
  issuer: string;
  clientId: string;
  clientSecret: string;
  addAccount(login: string, claims: { email: string; email_verified: boolean; name: string }): void;
  close(): Promise<void>;
}

export async function startGoogleStub(redirectUri: string): Promise<GoogleStub> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const clientId = `${randomBytes(6).toString('hex')}.apps.example`;
  const clientSecret = randomBytes(24).toString('hex');
  const accounts = new Map<string, { email: string; email_verified: boolean; name: string }>();
  // Our own signing key: the library's quick-start keys would do, but warn on every run.
  const signingKey = { ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256', kid: 'test' };
  const provider = new Provider(issuer, {
    jwks: { keys: [signingKey as never] },
    clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: [redirectUri], grant_types: ['authorization_code'], response_types: ['code'] }],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    pkce: { required: () => true },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    async findAccount(_ctx, sub) {
      const claims = accounts.get(sub);
      if (!claims) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...claims }) };
    },
  });
  // Quiet: the development interactions log a warning per request otherwise.
  provider.on('server_error', () => {});
  const server: Server = provider.listen(port, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  return {
    issuer,
    clientId,
    clientSecret,
    addAccount: (login, claims) => accounts.set(login, claims),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
