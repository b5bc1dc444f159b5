import { VENDOR_NAMES, type VendorName } from '../core/vendor-names.ts';
import { plugin as anthropic } from './anthropic/index.ts';
import { plugin as google } from './google/index.ts';
import { plugin as openai } from './openai/index.ts';
import type { VendorPlugin } from './plugin.ts';

export type { VendorPlugin } from './plugin.ts';

/**
 * The vendor registry: each vendor's plug-in (its folder, `vendors/<vendor>/`), keyed by the names
 * of core/vendor-names.ts (the one list of names: config, workflow, activities, log redaction and
 * simulator derive from it). docs/architecture.md, "Adding a vendor", lists what a new vendor touches.
 */
export const VENDOR_REGISTRY: { readonly [V in VendorName]: VendorPlugin<V> } = { openai, anthropic, google };

/** The registry's plug-ins in the order of core/vendor-names.ts. */
export const VENDOR_PLUGINS: readonly VendorPlugin[] = VENDOR_NAMES.map((v) => VENDOR_REGISTRY[v]);
