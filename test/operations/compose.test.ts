import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { simulatorNotice, vendorSetup } from '../../vendors/index.ts';
import { LOW_LATENCY_DYNAMIC_CONFIG } from '../../tools/scripts/temporal.ts';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';

// docker-compose.yml's application services read with compose's interpolation rules, then parsed
// by the real loadConfig: what each container would run with, keys or no keys. (No Docker engine
// here; CI also validates the file with docker-compose config, for every profile.)

type Service = { environment?: Record<string, string>; command?: string[]; depends_on?: Record<string, { condition: string }>; deploy?: { replicas: number } };
const compose = parse(readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8'), { merge: true }) as { services: Record<string, Service> };

/** Compose's ${VAR}, ${VAR:-default} and ${VAR:?error} against `dotenv`; `$$` is a literal `$`. */
function interpolate(value: string, dotenv: Record<string, string>): string {
  return value.replace(/\$\$|\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}/g, (whole, name: string | undefined, op: string | undefined, arg: string | undefined) => {
    if (whole === '$$') return '$';
    const set = dotenv[name!];
    if (set) return set;
    if (op === ':?') throw new Error(`compose would stop: ${arg}`);
    return op === ':-' ? (arg ?? '') : '';
  });
}

const SECRETS = { INTERNAL_SECRET: 'x'.repeat(40), AUTH_SECRET: 'y'.repeat(40) };
function containerConfig(service: string, dotenv: Record<string, string>) {
  const env = Object.fromEntries(Object.entries(compose.services[service]!.environment!).map(([k, v]) => [k, interpolate(String(v), dotenv)]));
  return loadConfig(env);
}

describe('docker-compose.yml', () => {
  it('without vendor keys points the API and every worker at its sim-vendor service, and they say so', () => {
    const sim = compose.services['sim-vendor']!;
    expect(sim.command).toEqual(['npm', 'run', 'sim-vendor']);
    expect(sim.environment).toEqual({ SIM_HOST: '0.0.0.0', SIM_PORT: '4010' });
    for (const service of ['api', 'api-2', 'worker']) {
      const config = containerConfig(service, SECRETS);
      expect(config.SIM_VENDOR_URL).toBe('http://sim-vendor:4010');
      expect(vendorSetup(config).simulated).toEqual(['openai', 'anthropic', 'google']);
      expect(simulatorNotice(config)).toMatch(/^!!! No vendor API key configured .* SIMULATOR at http:\/\/sim-vendor:4010,/);
      expect(compose.services[service]!.depends_on?.['sim-vendor']).toEqual({ condition: 'service_healthy' });
    }
    expect(compose.services.worker!.deploy?.replicas).toBe(2);
  });

  it('with a key in .env passes it through, calls only the real vendor and never the simulator', () => {
    const config = containerConfig('worker', { ...SECRETS, ANTHROPIC_API_KEY: 'sk-ant-real', ANTHROPIC_MODEL: 'claude-opus-4-1' });
    expect(config.ANTHROPIC_API_KEY).toBe('sk-ant-real');
    expect(config.ANTHROPIC_MODEL).toBe('claude-opus-4-1');
    expect(config.SIM_VENDOR_URL).toBeUndefined();
    expect(vendorSetup(config).vendors.map((v) => [v.vendor, v.simulated])).toEqual([['anthropic', false]]);
    expect(simulatorNotice(config)).toBeNull();
    // Unset vendor settings stay unset (empty = default), not empty strings that fail validation.
    expect(config.OPENAI_MODEL).toBe('gpt-4.1-mini');
    expect(config.VENDOR_ORDER).toEqual(['openai', 'anthropic', 'google']);
  });

  it('refuses to start with a live Stripe key while vendors are simulated: real money for made-up answers', () => {
    const payments = { STRIPE_WEBHOOK_SECRET: 'whsec_x' };
    for (const live of ['sk_live_abc', 'rk_live_abc']) {
      expect(() => containerConfig('api', { ...SECRETS })).not.toThrow();
      expect(() => loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: 'http://sim-vendor:4010', STRIPE_SECRET_KEY: live, ...payments })).toThrow(/live key; customers would pay real money/);
      expect(() => loadConfig({ SIM_VENDOR_URL: 'http://127.0.0.1:4010', OPENAI_API_KEY: 'sk-real', STRIPE_SECRET_KEY: live, ...payments })).toThrow(ConfigError);
      // With the vendor keys set, the simulator is not used and payments may be live.
      expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: 'http://sim-vendor:4010', OPENAI_API_KEY: 'sk-real', STRIPE_SECRET_KEY: live, ...payments }).SIM_VENDOR_URL).toBeUndefined();
    }
    // npm start refuses it before touching the database or Temporal (it would start the simulator itself).
    const started = spawnSync(process.execPath, ['--import', 'tsx', 'tools/scripts/start.ts'], {
      cwd: new URL('../..', import.meta.url),
      env: { PATH: process.env.PATH, HOME: process.env.HOME, STRIPE_SECRET_KEY: 'sk_live_abc', ...payments, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/never' },
      encoding: 'utf8',
      // A safety net for a hung start, not a speed figure: a loaded machine takes a while to load tsx.
      timeout: 120_000,
    });
    expect(started.status).toBe(2);
    expect(started.stderr).toMatch(/live key; customers would pay real money/);
    // Stripe's test mode (and stripe-mock) with the simulator is development: allowed.
    expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: 'http://sim-vendor:4010', STRIPE_SECRET_KEY: 'sk_test_abc', ...payments }).SIM_VENDOR_URL).toBe('http://sim-vendor:4010');
  }, 150_000);

  it('keeps API and worker replicas on one shared S3 bucket, and refuses to start without the secrets', () => {
    for (const service of ['api', 'api-2', 'worker']) {
      const config = containerConfig(service, SECRETS);
      expect(config).toMatchObject({ BLOB_STORE: 's3', S3_BUCKET: 'lenstack-blobs', S3_ENDPOINT: 'http://s3:7070', S3_FORCE_PATH_STYLE: true, TEMPORAL_ADDRESS: 'temporal:7233' });
    }
    expect(() => containerConfig('api', { AUTH_SECRET: SECRETS.AUTH_SECRET })).toThrow(/compose would stop: set INTERNAL_SECRET/);
  });

  it('documents in .env.example every variable the compose files read from .env', () => {
    const text = ['../../docker-compose.yml', '../../deploy/compose.temporal-server.yml'].map((f) => readFileSync(new URL(f, import.meta.url), 'utf8')).join('\n');
    const example = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
    const documented = new Set([...example.matchAll(/^([A-Z0-9_]+)=/gm)].map((m) => m[1]));
    const read = new Set([...text.matchAll(/\$\{([A-Z0-9_]+)/g)].map((m) => m[1]!));
    expect([...read].filter((v) => !documented.has(v))).toEqual([]);
    for (const key of ['INTERNAL_SECRET', 'AUTH_SECRET', 'OPENAI_API_KEY', 'STRIPE_SECRET_KEY', 'GITHUB_CLIENT_ID', 'GOOGLE_CLIENT_ID', 'SMTP_URL', 'S3_ENDPOINT', 'TEMPORAL_ADDRESS']) expect(documented.has(key)).toBe(true);
  });

  it('passes the payment, sign-in and mail settings to the console, and them only to it', () => {
    const settings = {
      STRIPE_SECRET_KEY: 'sk_test_abc',
      STRIPE_WEBHOOK_SECRET: 'whsec_abc',
      GITHUB_CLIENT_ID: 'gh-id',
      GITHUB_CLIENT_SECRET: 'gh-secret',
      GOOGLE_CLIENT_ID: 'google-id',
      GOOGLE_CLIENT_SECRET: 'google-secret',
      SMTP_URL: 'smtps://mailer:pw@smtp.example.com:465',
      MAIL_FROM: 'Fleet <fleet@example.com>',
      WEB_URL: 'https://console.example.com',
      TEMPORAL_ADDRESS: 'temporal.example.com:7233',
      TEMPORAL_NAMESPACE: 'lenstack-prod',
    };
    const operator = { ...SECRETS, ...settings };
    // Each as the operator wrote it in .env (all of these are strings to the config loader too).
    expect(containerConfig('web', operator)).toMatchObject(settings);
    // Unset, they stay unset: no purchase and no provider button, rather than empty strings.
    const bare = containerConfig('web', SECRETS);
    expect([bare.STRIPE_SECRET_KEY, bare.STRIPE_WEBHOOK_SECRET, bare.GITHUB_CLIENT_ID, bare.GOOGLE_CLIENT_ID, bare.SMTP_URL]).toEqual([undefined, undefined, undefined, undefined, 'smtp://mailpit:1025']);
    // The secrets of payments and sign-in do not reach processes that never use them.
    for (const service of ['api', 'api-2', 'worker']) {
      const config = containerConfig(service, operator);
      expect([config.STRIPE_SECRET_KEY, config.GITHUB_CLIENT_SECRET, config.GOOGLE_CLIENT_SECRET, config.TEMPORAL_ADDRESS]).toEqual([undefined, undefined, undefined, 'temporal.example.com:7233']);
    }
  });

  it('runs two console replicas alike behind one gateway, which they trust for client addresses', () => {
    const operator = { ...SECRETS, STRIPE_SECRET_KEY: 'sk_test_abc', STRIPE_WEBHOOK_SECRET: 'whsec_abc' };
    expect(containerConfig('web-2', operator)).toEqual(containerConfig('web', operator));
    expect(containerConfig('web', operator).TRUSTED_PROXIES).toBe('10.0.0.0/8,172.16.0.0/12,192.168.0.0/16');
    const gateway = compose.services['console-gateway']! as Service & { command: string[]; ports: string[] };
    expect(gateway.command).toEqual(['caddy', 'reverse-proxy', '--from', ':3000', '--to', 'web:3000', '--to', 'web-2:3000']);
    expect(gateway.ports).toEqual(['3000:3000']);
    // Only the gateway publishes the console's port; the replicas share the bucket for uploads.
    for (const replica of ['web', 'web-2']) {
      expect((compose.services[replica] as { ports?: unknown }).ports).toBeUndefined();
      expect(containerConfig(replica, SECRETS).BLOB_STORE).toBe('s3');
    }
  });

  it('has a Temporal server file that replaces the development server with the same namespace set-up', () => {
    const override = parse(readFileSync(new URL('../../deploy/compose.temporal-server.yml', import.meta.url), 'utf8')) as { services: Record<string, Service & { image?: string; environment?: Record<string, string>; entrypoint?: string[]; volumes?: string[] }> };
    const temporal = override.services.temporal!;
    expect(temporal.image).toMatch(/^temporalio\/server:/);
    expect(temporal.environment).toMatchObject({ DB: 'postgres12', POSTGRES_SEEDS: 'temporal-postgres', DYNAMIC_CONFIG_FILE_PATH: '/lenstack/dynamicconfig.yaml' });
    expect(temporal.depends_on).toEqual({ 'temporal-schema': { condition: 'service_completed_successfully' } });
    // Paths in a second compose file are relative to the first file's folder (the repository's root).
    for (const name of ['temporal', 'temporal-schema', 'temporal-namespace']) expect(override.services[name]!.volumes).toEqual(['./deploy/temporal:/lenstack:ro']);
    expect(override.services.migrate!.depends_on).toEqual({ 'temporal-namespace': { condition: 'service_completed_successfully' } });
    // The search attributes the workflows need, registered as the dev server's flags do.
    const setup = readFileSync(new URL('../../deploy/temporal/setup.sh', import.meta.url), 'utf8');
    const registered = setup.match(/for attribute in ([^;]+);/)![1]!.trim().split(/\s+/);
    const devServer = compose.services.temporal!.command!.filter((a) => a.startsWith('--search-attribute=')).map((a) => a.slice('--search-attribute='.length));
    const needed = Object.values(SEARCH_ATTRIBUTES).map((k) => `${k.name}=${{ KEYWORD: 'Keyword', INT: 'Int' }[k.type as 'KEYWORD' | 'INT']}`);
    expect(registered.sort()).toEqual([...needed].sort());
    expect(devServer.sort()).toEqual([...needed].sort());
    // The low-latency settings, the same as the dev server's.
    const dynamic = parse(readFileSync(new URL('../../deploy/temporal/dynamicconfig.yaml', import.meta.url), 'utf8')) as Record<string, { value: unknown }[]>;
    expect(Object.fromEntries(Object.entries(dynamic).map(([k, v]) => [k, v[0]!.value]))).toEqual(LOW_LATENCY_DYNAMIC_CONFIG);
  });
});
