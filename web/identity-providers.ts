import type { GenericOAuthConfig } from 'better-auth/plugins/generic-oauth';
import type { Config } from '../core/config.ts';

/**
 * The identity providers the console offers, from configuration: each is hidden, not broken, when
 * it has no client id. Both speak OAuth 2 authorization code with PKCE and state (better-auth's
 * generic OAuth plugin); Google through OpenID Connect discovery at GOOGLE_ISSUER, GitHub at
 * GITHUB_BASE_URL / GITHUB_API_URL, so GitHub Enterprise and local test providers work alike.
 * A person is only ever identified by an address the provider says is verified.
 */
export type ProviderId = 'github' | 'google';

export function configuredProviders(config: Config): ProviderId[] {
  return [...(config.GITHUB_CLIENT_ID ? ['github' as const] : []), ...(config.GOOGLE_CLIENT_ID ? ['google' as const] : [])];
}

const trimmed = (url: string) => url.replace(/\/+$/, '');

export function identityProviderConfigs(config: Config): GenericOAuthConfig[] {
  const out: GenericOAuthConfig[] = [];
  if (config.GOOGLE_CLIENT_ID && config.GOOGLE_CLIENT_SECRET) {
    out.push({
      providerId: 'google',
      name: 'Google',
      clientId: config.GOOGLE_CLIENT_ID,
      clientSecret: config.GOOGLE_CLIENT_SECRET,
      discoveryUrl: `${trimmed(config.GOOGLE_ISSUER)}/.well-known/openid-configuration`,
      scopes: ['openid', 'email', 'profile'],
      pkce: true,
      requireIdTokenVerification: true,
      // Google reports email_verified; an unverified address gets no session.
      requireEmailVerification: true,
    });
  }
  if (config.GITHUB_CLIENT_ID && config.GITHUB_CLIENT_SECRET) {
    const api = trimmed(config.GITHUB_API_URL);
    out.push({
      providerId: 'github',
      name: 'GitHub',
      clientId: config.GITHUB_CLIENT_ID,
      clientSecret: config.GITHUB_CLIENT_SECRET,
      authorizationUrl: `${trimmed(config.GITHUB_BASE_URL)}/login/oauth/authorize`,
      tokenUrl: `${trimmed(config.GITHUB_BASE_URL)}/login/oauth/access_token`,
      scopes: ['read:user', 'user:email'],
      pkce: true,
      authentication: 'post',
      // GitHub's /user shows only a public address, if any: the primary verified one comes from /user/emails.
      async getUserInfo(tokens) {
        const headers = { authorization: `Bearer ${tokens.accessToken}`, accept: 'application/vnd.github+json', 'user-agent': 'lenstack-console' };
        const [userRes, emailsRes] = await Promise.all([fetch(`${api}/user`, { headers }), fetch(`${api}/user/emails`, { headers })]);
        if (!userRes.ok || !emailsRes.ok) return null;
        const user = (await userRes.json()) as { id: number; login: string; name?: string | null; avatar_url?: string };
        const emails = (await emailsRes.json()) as Array<{ email: string; primary: boolean; verified: boolean }>;
        const email = emails.find((e) => e.primary && e.verified) ?? emails.find((e) => e.verified);
        if (!email) return null;
        return { id: String(user.id), name: user.name || user.login, email: email.email, ...(user.avatar_url ? { image: user.avatar_url } : {}), emailVerified: true };
      },
    });
  }
  return out;
}
