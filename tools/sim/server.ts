/**
 * CLI entry of the vendor simulator: `npx tsx sim/server.ts --port 4010` (or `npm run sim-vendor`).
 * Then start the service with SIM_VENDOR_URL=http://127.0.0.1:4010 and no vendor keys.
 */
import { VENDOR_ENV_PREFIX } from '../../core/vendor-names.ts';
import { simBaseURL } from '../../vendors/index.ts';
import { startSimVendor, VENDORS } from './app.ts';
import { SimUsageError, simOptionsFrom, USAGE } from './cli-options.ts';

let options;
try {
  options = simOptionsFrom(process.argv.slice(2), process.env);
} catch (e) {
  console.error(e instanceof SimUsageError ? e.message : e);
  process.exit(2);
}
if (options.help) {
  console.log(USAGE);
  process.exit(0);
}

const sim = await startSimVendor({ ...options, log: (line) => console.log(line) });

const bar = '='.repeat(78);
console.log(
  [
    bar,
    '  LENSTACK VENDOR SIMULATOR: answers are GENERATED from the request schema, NOT by an AI model.',
    '  Never point production at this server. Every response carries x-lenstack-simulated: true.',
    bar,
    `  listening on ${sim.url}`,
    `  ${VENDORS.map((v) => `${VENDOR_ENV_PREFIX[v]}_BASE_URL=${simBaseURL(v, sim.url)}`).join('   ')}`,
    `  or, for the service: SIM_VENDOR_URL=${sim.url} (vendors without an API key use the simulator)`,
    `  control: GET ${sim.url}/__sim/stats | GET/POST ${sim.url}/__sim/config | GET/POST ${sim.url}/__sim/limits | POST ${sim.url}/__sim/reset`,
    ...VENDORS.map((v) => `  ${v.padEnd(9)} ${JSON.stringify(sim.behaviour(v))} limits ${JSON.stringify(sim.limits(v))}`),
    bar,
  ].join('\n'),
);

let closing = false;
const shutdown = (signal: string) => {
  if (closing) return;
  closing = true;
  console.log(`[SIM] ${signal}: shutting down`);
  sim.close().then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
};
process.on('SIGINT', () => shutdown('SIGINT'));
process.on('SIGTERM', () => shutdown('SIGTERM'));
