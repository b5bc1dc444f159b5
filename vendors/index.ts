import type { Config, VendorName } from '../core/config.ts';
import type { VisionClient } from './types.ts';
import { VENDOR_NAMES } from '../core/vendor-names.ts';
import { VENDOR_REGISTRY } from './registry.ts';
import { apiKeyVar, vendorSettings } from './settings.ts';
import type { AdapterOptions } from './answer.ts';
import { prepareImage } from './resize.ts';

export type { VisionClient, VisionRequest, VisionResult } from './types.ts';
export { VendorError, type VendorErrorKind } from './errors.ts';
export { VENDOR_PLUGINS, VENDOR_REGISTRY, type VendorPlugin } from './registry.ts';
export { vendorSettings, type VendorSettings } from './settings.ts';

/** Key sent to the sim: it checks that a key is present, never its value. */
export const SIM_API_KEY = 'sim-key-not-a-secret';

/** Where each SDK must point to reach sim/ running at `simUrl` (see sim/README in the report). */
export function simBaseURL(vendor: VendorName, simUrl: string): string {
  return `${simUrl.replace(/\/+$/, '')}${VENDOR_REGISTRY[vendor].simPath}`;
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
    const keyVar = apiKeyVar(vendor);
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

/**
 * The vendor's SDK client, handed its image preparation and its schema dialect (vendors/plugin.ts,
 * `ClientParts`).
 */
export function createVendorClient(vendor: VendorName, opts: AdapterOptions): VisionClient {
  const plugin = VENDOR_REGISTRY[vendor];
  return plugin.createClient(opts, { prepareImage: (image) => prepareImage(vendor, image), toSchema: plugin.toSchema });
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
  const clients = setup.vendors.map(({ vendor, ...o }) => createVendorClient(vendor, { ...o, promptCache: config.VENDOR_PROMPT_CACHE, ...opts }));
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
    `!!! No vendor API key configured (${VENDOR_NAMES.map(apiKeyVar).join(', ')}): analyses are answered by the ` +
    `vendor SIMULATOR at ${config.SIM_VENDOR_URL}, labelled "simulated", not real AI output.`
  );
}
