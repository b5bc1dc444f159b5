import type { Config, VendorName } from '../core/config.ts';
import type { VisionClient } from './types.ts';
import type { AdapterOptions } from './answer.ts';
import { createOpenAIClient } from './openai.ts';
import { createAnthropicClient } from './anthropic.ts';
import { createGoogleClient } from './google.ts';

export type { VisionClient, VisionRequest, VisionResult } from './types.ts';
export { VendorError, type VendorErrorKind } from './errors.ts';

/** Key sent to the sim: it checks that a key is present, never its value. */
export const SIM_API_KEY = 'sim-key-not-a-secret';

const FACTORIES: Record<VendorName, (opts: AdapterOptions) => VisionClient> = {
  openai: createOpenAIClient,
  anthropic: createAnthropicClient,
  google: createGoogleClient,
};

/** Where each SDK must point to reach sim/ running at `simUrl` (see sim/README in the report). */
export function simBaseURL(vendor: VendorName, simUrl: string): string {
  const root = simUrl.replace(/\/+$/, '');
  // The openai SDK appends `/chat/completions` to its base URL, which must therefore carry /v1;
  // the anthropic SDK appends `/v1/messages`; @google/genai appends `/v1beta/models/...`.
  return vendor === 'openai' ? `${root}/v1` : root;
}

function vendorSettings(config: Config, vendor: VendorName): { apiKey?: string; baseURL?: string; model: string } {
  switch (vendor) {
    case 'openai':
      return { apiKey: config.OPENAI_API_KEY, baseURL: config.OPENAI_BASE_URL, model: config.OPENAI_MODEL };
    case 'anthropic':
      return { apiKey: config.ANTHROPIC_API_KEY, baseURL: config.ANTHROPIC_BASE_URL, model: config.ANTHROPIC_MODEL };
    case 'google':
      return { apiKey: config.GEMINI_API_KEY, baseURL: config.GEMINI_BASE_URL, model: config.GEMINI_MODEL };
  }
}

/** Which vendors this deployment calls, from config alone (no SDK client is built). */
export interface VendorSetup {
  /** In VENDOR_ORDER: the workflow tries them first to last. */
  vendors: Array<{ vendor: VendorName; apiKey: string; baseURL: string | undefined; model: string; simulated: boolean }>;
  /** Vendors answered by the simulator (no key of their own, SIM_VENDOR_URL set). */
  simulated: VendorName[];
  /** One line per vendor that is simulated or skipped, for the startup log and response warnings. */
  warnings: string[];
}

/**
 * A vendor with its own API key is real (its base URL, or the SDK's default). A vendor without
 * a key goes to the simulator when SIM_VENDOR_URL is set, and is skipped otherwise.
 */
export function vendorSetup(config: Config): VendorSetup {
  const vendors: VendorSetup['vendors'] = [];
  const simulated: VendorName[] = [];
  const warnings: string[] = [];
  // Config parsing does not reject duplicates in VENDOR_ORDER; a vendor is tried once.
  for (const vendor of new Set(config.VENDOR_ORDER)) {
    const settings = vendorSettings(config, vendor);
    const keyVar = `${vendor === 'google' ? 'GEMINI' : vendor.toUpperCase()}_API_KEY`;
    if (settings.apiKey) {
      vendors.push({ vendor, apiKey: settings.apiKey, baseURL: settings.baseURL, model: settings.model, simulated: false });
    } else if (config.SIM_VENDOR_URL) {
      const baseURL = simBaseURL(vendor, config.SIM_VENDOR_URL);
      vendors.push({ vendor, apiKey: SIM_API_KEY, baseURL, model: settings.model, simulated: true });
      simulated.push(vendor);
      warnings.push(`${vendor}: no ${keyVar}; answers come from the SIMULATED vendor at ${baseURL}`);
    } else {
      warnings.push(`${vendor}: skipped (no ${keyVar} and no SIM_VENDOR_URL)`);
    }
  }
  if (vendors.length === 0) warnings.push('no vision vendor is configured: every analysis will fail');
  return { vendors, simulated, warnings };
}

export interface VisionClients {
  /** In VENDOR_ORDER: the workflow tries them first to last. */
  clients: VisionClient[];
  /** Vendors answered by the simulator (no key of their own, SIM_VENDOR_URL set). */
  simulated: VendorName[];
  /** One line per vendor that is simulated or skipped, for the startup log and response warnings. */
  warnings: string[];
}

/** The SDK clients of the vendors vendorSetup names (the worker's; the API needs only the names). */
export function createVisionClients(config: Config, opts: { timeoutMs?: number } = {}): VisionClients {
  const setup = vendorSetup(config);
  const clients = setup.vendors.map(({ vendor, ...o }) => FACTORIES[vendor]({ ...o, promptCache: config.VENDOR_PROMPT_CACHE, ...opts }));
  return { clients, simulated: setup.simulated, warnings: setup.warnings };
}

/**
 * The loud startup line of a process whose vendors are all simulated (no vendor key at all),
 * naming the simulator; null when at least one vendor is real.
 */
export function simulatorNotice(config: Config): string | null {
  const setup = vendorSetup(config);
  if (setup.vendors.length === 0 || setup.vendors.some((v) => !v.simulated)) return null;
  return (
    `!!! No vendor API key configured (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY): analyses are answered by the ` +
    `vendor SIMULATOR at ${config.SIM_VENDOR_URL}, labelled "simulated", not real AI output.`
  );
}
