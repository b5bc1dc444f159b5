/**
 * `npm start`: the whole service on embedded defaults. Applies migrations, starts (or reuses) the
 * Temporal dev server, the vendor simulator when no vendor key is set, then the API and one worker
 * as child processes. Ctrl-C stops everything.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, refuseLivePaymentsWithSimulator, webUrl } from '../../core/config.ts';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from '../../worker/address.ts';
import { VENDOR_NAMES } from '../../core/vendor-names.ts';
import { anyVendorKey, apiKeyVar } from '../../vendors/settings.ts';
import { startSimVendor } from '../sim/index.ts';
import { ensureConsoleBuilt } from './build-web.ts';
import { ensureHeicDecoder } from './heic-decoder.ts';
import { generateInternalSecret, localAuthSecret } from './internal-secret.ts';
import { connectIfTemporal, ensureSearchAttributes, startTemporalDevServer, type DevServer } from './temporal.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const say = (msg: string) => console.log(`[lenstack] ${msg}`);

let config;
try {
  config = loadConfig();
  // Without a vendor key the children run on the simulator started below: check that configuration
  // now (a live Stripe key refuses it), before the database or Temporal are touched.
  if (!config.SIM_VENDOR_URL && !anyVendorKey(config)) {
    refuseLivePaymentsWithSimulator({ ...config, SIM_VENDOR_URL: 'the simulator npm start runs' });
  }
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(2);
  }
  throw err;
}

/** Local state (DATA_DIR, relative to the checkout unless absolute): Temporal's SQLite file and log, generated secrets. */
const DATA = resolve(ROOT, config.DATA_DIR);

const stops: Array<() => Promise<void>> = [];
let stopping = false;
async function stopAll(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    say('stopping…');
    for (const stop of stops.reverse()) await stop().catch((e: Error) => say(`stop failed: ${e.message}`));
  }
  process.exit(code);
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

const childEnv: NodeJS.ProcessEnv = { ...process.env };
const graceMs = config.SHUTDOWN_GRACE_MS;

try {
  if (await createDatabaseIfMissing(config.DATABASE_URL)) say(`created database ${new URL(config.DATABASE_URL).pathname.slice(1)}`);
  await migrate(config.DATABASE_URL);
  say('database migrated');

  // Temporal: TEMPORAL_ADDRESS = someone else's cluster; otherwise reuse or start the dev server.
  let temporalAddress = config.TEMPORAL_ADDRESS;
  let uiUrl: string | null = null;
  if (!temporalAddress) {
    const existing = await connectIfTemporal(DEFAULT_TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, 1500).catch(() => null);
    if (existing) {
      await ensureSearchAttributes(existing, config.TEMPORAL_NAMESPACE);
      await existing.close();
      temporalAddress = DEFAULT_TEMPORAL_ADDRESS;
      uiUrl = 'http://127.0.0.1:8233';
      say(`reusing the Temporal server already running at ${temporalAddress}`);
    } else {
      mkdirSync(DATA, { recursive: true });
      say('starting the Temporal dev server (first run may build the temporal CLI with go, ~5 min)…');
      const server: DevServer = await startTemporalDevServer({
        port: 7233,
        uiPort: 8233,
        dbFile: join(DATA, 'temporal.sqlite'),
        namespace: config.TEMPORAL_NAMESPACE,
        logFile: join(DATA, 'temporal.log'),
      });
      stops.push(() => server.stop());
      temporalAddress = server.address;
      uiUrl = server.uiUrl;
    }
  } else {
    const connection = await connectIfTemporal(temporalAddress, config.TEMPORAL_NAMESPACE, 10_000);
    await ensureSearchAttributes(connection, config.TEMPORAL_NAMESPACE);
    await connection.close();
    say(`using the Temporal cluster at ${temporalAddress}`);
  }
  childEnv.TEMPORAL_ADDRESS = temporalAddress;

  // No vendor key at all: answer from the simulator, and say so loudly.
  const anyKey = anyVendorKey(config);
  if (!config.SIM_VENDOR_URL && !anyKey) {
    const sim = await startSimVendor({ port: 0 });
    stops.push(() => sim.close());
    childEnv.SIM_VENDOR_URL = sim.url;
    say(`!!! No vendor API key configured (${VENDOR_NAMES.map(apiKeyVar).join(', ')}).`);
    say(`!!! Analyses are answered by the vendor SIMULATOR at ${sim.url}: labelled "simulated", not real AI output.`);
    // A stack with simulated vendors is a development one: its pack purchases charge no card either
    // (unless Stripe, test mode, is configured: then API and console both sell through it,
    // payments/configured.ts).
    if (!childEnv.PAYMENTS_GATEWAY && !config.STRIPE_SECRET_KEY) {
      childEnv.PAYMENTS_GATEWAY = 'recording';
      say('!!! Pack purchases use the RECORDING payment gateway: no card is charged (PAYMENTS_GATEWAY=recording).');
    }
  }

  if (!config.INTERNAL_SECRET) {
    const generated = generateInternalSecret(DATA);
    childEnv.INTERNAL_SECRET = generated.secret;
    say(generated.message);
  }

  if (!config.AUTH_SECRET) {
    const local = localAuthSecret(DATA);
    childEnv.AUTH_SECRET = local.secret;
    say(`AUTH_SECRET not set: the console signs sessions with the one in ${local.file}${local.created ? ' (new)' : ''}`);
  }
  // Without SMTP_URL the console keeps its mail in the development mailbox, which shows every
  // sign-in link to whoever can open it: asked for here explicitly, with the console on loopback.
  const webEnv: NodeJS.ProcessEnv = {};
  if (!config.SMTP_URL) {
    webEnv.DEV_MAILBOX = 'true';
    webEnv.HOST = '127.0.0.1';
    say('!!! No SMTP_URL: console mail goes to the DEVELOPMENT MAILBOX (see below), not to anyone; the console listens on 127.0.0.1 only.');
  }
  if (await ensureConsoleBuilt()) say('console front end built (web/ui/dist)');
  // The native HEIC decoder, built once per source when the machine has gcc and libheif-dev; the
  // processes below fall back to libheif's WASM build without it (each logs which one it uses).
  if (config.HEIC_DECODER !== 'wasm' && !config.HEIC_DECODER_PATH) {
    await ensureHeicDecoder({ log: say }).catch((err: unknown) => {
      say(`HEIC: no native decoder (${err instanceof Error ? err.message : String(err)}); HEICs are decoded by libheif's WASM build, several times slower`);
    });
  }

  const children: ChildProcess[] = [];
  const run = (name: string, script: string, env: NodeJS.ProcessEnv = {}) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, env: { ...childEnv, ...env }, stdio: 'inherit' });
    children.push(child);
    child.on('exit', (code, signal) => {
      if (!stopping) {
        say(`${name} exited (${signal ?? code}); stopping everything`);
        void stopAll(code ?? 1);
      }
    });
    stops.push(
      () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
          // Each child drains for SHUTDOWN_GRACE_MS (in-flight requests, activities) before it exits.
          setTimeout(() => child.kill('SIGKILL'), graceMs + 15_000).unref();
        }),
    );
    return child;
  };
  run('worker', 'worker/main.ts');
  run('api', 'api/server.ts');
  run('web', 'web/server.ts', webEnv);

  const base = `http://127.0.0.1:${config.PORT}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`${base}/v1/health`).then((r) => r.ok).catch(() => false);
    if (ok) break;
    if (Date.now() > deadline) throw new Error(`the API did not answer ${base}/v1/health within 60 s`);
    await new Promise((r) => setTimeout(r, 250));
  }
  // The console answers its session route (401 when signed out) once it listens.
  const webLocal = `http://127.0.0.1:${config.WEB_PORT}`;
  for (;;) {
    const up = await fetch(`${webLocal}/api/v1/session`).then((r) => r.status === 401).catch(() => false);
    if (up) break;
    if (Date.now() > deadline) throw new Error(`the console did not answer ${webLocal} within 60 s`);
    await new Promise((r) => setTimeout(r, 250));
  }
  say('');
  say(`API          ${base}   (health: ${base}/v1/health)`);
  say(`Docs         ${base}/v1/docs   OpenAPI: ${base}/v1/openapi.json   llms.txt: ${base}/v1/llms.txt`);
  say(`Console      ${webUrl(config)}${config.SMTP_URL ? '' : `   (development mailbox: ${webUrl(config)}/dev/mailbox)`}`);
  say(`Temporal UI  ${uiUrl ?? '(not started here: see your cluster)'}   frontend: ${temporalAddress}`);
  say(`First key:   sign up in the console (${webUrl(config)}/sign-up), or from a shell:`);
  say('             npm run admin -- user create --email you@example.com');
  say('             npm run admin -- credits grant --user <userId> --pool purchased --amount 1000');
  say('Ctrl-C stops everything.');
} catch (err) {
  console.error(`[lenstack] start failed: ${(err as Error).message}`);
  await stopAll(1);
}
