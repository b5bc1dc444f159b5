import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { simulatorNotice, vendorSetup } from '../../vendors/index.ts';

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
      timeout: 30_000,
    });
    expect(started.status).toBe(2);
    expect(started.stderr).toMatch(/live key; customers would pay real money/);
    // Stripe's test mode (and stripe-mock) with the simulator is development: allowed.
    expect(loadConfig({ SIM_VENDOR_URL_IF_NO_KEYS: 'http://sim-vendor:4010', STRIPE_SECRET_KEY: 'sk_test_abc', ...payments }).SIM_VENDOR_URL).toBe('http://sim-vendor:4010');
  });

  it('keeps API and worker replicas on one shared S3 bucket, and refuses to start without the secrets', () => {
    for (const service of ['api', 'api-2', 'worker']) {
      const config = containerConfig(service, SECRETS);
      expect(config).toMatchObject({ BLOB_STORE: 's3', S3_BUCKET: 'lenstack-blobs', S3_ENDPOINT: 'http://s3:7070', S3_FORCE_PATH_STYLE: true, TEMPORAL_ADDRESS: 'temporal:7233' });
    }
    expect(() => containerConfig('api', { AUTH_SECRET: SECRETS.AUTH_SECRET })).toThrow(/compose would stop: set INTERNAL_SECRET/);
  });

  it('documents in .env.example every variable docker-compose.yml reads from .env', () => {
    const text = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');
    const example = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
    const documented = new Set([...example.matchAll(/^([A-Z0-9_]+)=/gm)].map((m) => m[1]));
    const read = new Set([...text.matchAll(/\$\{([A-Z0-9_]+)/g)].map((m) => m[1]!));
    // S3_* and TRUSTED_PROXIES have working defaults for the bundled services; documented in README.
    const undocumented = [...read].filter((v) => !documented.has(v) && !v.startsWith('S3_') && v !== 'TRUSTED_PROXIES');
    expect(undocumented).toEqual([]);
    for (const key of ['INTERNAL_SECRET', 'AUTH_SECRET', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY']) expect(documented.has(key)).toBe(true);
  });
});
