import type { Config } from '../core/config.ts';
import { VENDOR_ENV_PREFIX, VENDOR_NAMES, type VendorName } from '../core/vendor-names.ts';

/** A vendor's settings from config: its `<PREFIX>_*` variables. */
export interface VendorSettings {
  apiKey?: string;
  baseURL?: string;
  model: string;
  /** Requests and tokens per minute of this deployment's account (0 = no limit known). */
  rpm: number;
  tpm: number;
}

export function vendorSettings(config: Config, vendor: VendorName): VendorSettings {
  const p = VENDOR_ENV_PREFIX[vendor];
  return {
    apiKey: config[`${p}_API_KEY`],
    baseURL: config[`${p}_BASE_URL`],
    model: config[`${p}_MODEL`],
    rpm: config[`${p}_RPM`],
    tpm: config[`${p}_TPM`],
  };
}

/** Name of the variable holding the vendor's API key. */
export const apiKeyVar = (vendor: VendorName): string => `${VENDOR_ENV_PREFIX[vendor]}_API_KEY`;

/** Whether any vendor has its own API key (else `npm start` answers from the simulator). */
export function anyVendorKey(config: Config): boolean {
  return VENDOR_NAMES.some((v) => Boolean(vendorSettings(config, v).apiKey));
}
