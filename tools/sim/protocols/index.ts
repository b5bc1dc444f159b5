import type { VendorName } from '../../../core/vendor-names.ts';
import { anthropicProtocol } from './anthropic.ts';
import type { Protocol } from './common.ts';
import { geminiProtocol } from './gemini.ts';
import { openaiProtocol } from './openai.ts';

/**
 * The simulated vendors, one protocol module each, keyed by the names of core/vendor-names.ts: the
 * server, its billing and its prompt cache read a vendor's part here and never name a vendor
 * (docs/architecture.md, "Adding a vendor"). The simulator is the vendors' stand-in, not product
 * code, so it lives in tools/ and the product never imports it.
 */
export const SIM_PROTOCOLS: { readonly [V in VendorName]: Protocol<V> } = {
  openai: openaiProtocol,
  anthropic: anthropicProtocol,
  google: geminiProtocol,
};
