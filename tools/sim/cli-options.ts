import { parseArgs } from 'node:util';
import type { VendorName } from '../../core/config.ts';
import { behaviourPatchSchema, FAILURE_MODES, type BehaviourPatch } from './behaviour.ts';
import { VENDORS, type SimVendorOptions } from './app.ts';
import { limitsPatchSchema, type LimitsPatch } from './rate-limits.ts';

/**
 * Options of `sim/server.ts` from flags, falling back to SIM_* environment variables (the sim's
 * own entry is the one place outside core/config.ts that reads the environment: it is a separate
 * program, not part of the service).
 *
 *   --port 4010            SIM_PORT            (default 4010)
 *   --host 127.0.0.1       SIM_HOST
 *   --seed lenstack-sim    SIM_SEED
 *   --latency-ms 0         SIM_LATENCY_MS      every vendor
 *   --fail-rate 0          SIM_FAIL_RATE       every vendor, 0..1
 *   --failure http500      SIM_FAILURE         http500|http429|http400|invalid-json|schema-invalid|stall
 *   --openai-fail-rate 0.5 SIM_OPENAI_FAIL_RATE   (and -latency-ms, -failure; per vendor of core/vendor-names.ts)
 *   --rpm 600 --tpm 0      SIM_RPM, SIM_TPM   requests / tokens per minute, every vendor (0 = unlimited)
 *   --openai-rpm 600       SIM_OPENAI_RPM      (and -tpm) per vendor; beyond: 429 with Retry-After
 */

const FIELDS = { 'latency-ms': 'latencyMs', 'fail-rate': 'failRate', failure: 'failure' } as const;
const LIMIT_FLAGS = ['rpm', 'tpm'] as const;
type Flag = keyof typeof FIELDS;

export class SimUsageError extends Error {}

function envName(flag: string): string {
  return `SIM_${flag.replace(/-/g, '_').toUpperCase()}`;
}

export const USAGE = `Lenstack vendor SIMULATOR (not a real AI vendor)
usage: npx tsx sim/server.ts [--port 4010] [--host 127.0.0.1] [--seed S]
         [--latency-ms N] [--fail-rate 0..1] [--failure ${FAILURE_MODES.join('|')}]
         [--<${VENDORS.join('|')}>-latency-ms N] [--<vendor>-fail-rate R] [--<vendor>-failure MODE]
         [--rpm N] [--tpm N] [--<vendor>-rpm N] [--<vendor>-tpm N]   (per minute; beyond: 429 + Retry-After)
Every flag also reads SIM_<FLAG> from the environment (e.g. SIM_OPENAI_FAIL_RATE).`;

export function simOptionsFrom(argv: string[], env: Record<string, string | undefined>): SimVendorOptions & { help: boolean } {
  const perVendor = [...Object.keys(FIELDS), ...LIMIT_FLAGS];
  const flagNames = ['port', 'host', 'seed', ...perVendor, ...VENDORS.flatMap((v) => perVendor.map((f) => `${v}-${f}`))];
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: argv,
      options: { ...Object.fromEntries(flagNames.map((n) => [n, { type: 'string' as const }])), help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (e) {
    throw new SimUsageError(`${e instanceof Error ? e.message : String(e)}\n${USAGE}`);
  }
  const get = (flag: string): string | undefined => {
    const v = values[flag];
    return typeof v === 'string' ? v : env[envName(flag)] || undefined;
  };

  const patch = (prefix: string): BehaviourPatch => {
    const raw: Record<string, unknown> = {};
    for (const [flag, field] of Object.entries(FIELDS) as [Flag, (typeof FIELDS)[Flag]][]) {
      const v = get(prefix + flag);
      if (v !== undefined) raw[field] = field === 'failure' ? v : Number(v);
    }
    const parsed = behaviourPatchSchema.safeParse(raw);
    if (!parsed.success) {
      throw new SimUsageError(`invalid ${prefix || 'default '}behaviour: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
    return parsed.data;
  };

  const limits = (prefix: string): LimitsPatch => {
    const raw: Record<string, number> = {};
    for (const f of LIMIT_FLAGS) {
      const v = get(prefix + f);
      if (v !== undefined) raw[f] = Number(v);
    }
    const parsed = limitsPatchSchema.safeParse(raw);
    if (!parsed.success) throw new SimUsageError(`invalid ${prefix || 'default '}limits: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    return parsed.data;
  };

  const port = Number(get('port') ?? 4010);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new SimUsageError(`invalid port ${get('port')}`);
  return {
    help: values.help === true,
    port,
    host: get('host') ?? '127.0.0.1',
    seed: get('seed') ?? 'lenstack-sim',
    behaviour: patch(''),
    vendors: Object.fromEntries(VENDORS.map((v) => [v, patch(`${v}-`)])) as Record<VendorName, BehaviourPatch>,
    limits: { all: limits(''), ...Object.fromEntries(VENDORS.map((v) => [v, limits(`${v}-`)])) },
  };
}
