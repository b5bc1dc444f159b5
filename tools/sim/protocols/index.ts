import type { VendorName } from '../../../core/vendor-names.ts';
import { protocol as anthropic } from '../../../vendors/anthropic/simulator.ts';
import { protocol as google } from '../../../vendors/google/simulator.ts';
import { protocol as openai } from '../../../vendors/openai/simulator.ts';
import type { Protocol } from './common.ts';

/**
 * The simulated vendors, one protocol module each in the vendor's folder
 * (vendors/<vendor>/simulator.ts), keyed by the names of core/vendor-names.ts: the server, its
 * billing and its prompt cache read a vendor's part here and never name a vendor
 * (docs/architecture.md, "Adding a vendor"). The simulator is the vendors' stand-in, not product
 * code: the product never imports a simulator.ts (.dependency-cruiser.cjs).
 */
export const SIM_PROTOCOLS: { readonly [V in VendorName]: Protocol<V> } = { openai, anthropic, google };
