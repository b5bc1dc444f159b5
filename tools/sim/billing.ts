import type { VendorName } from '../../core/config.ts';
import type { Dimensions } from './protocols/common.ts';
import { SIM_PROTOCOLS } from './protocols/index.ts';

/**
 * What each simulated vendor bills for an image it received, from the vendors' published rules,
 * written in each simulated vendor (vendors/<vendor>/simulator.ts, `imageTokens`) on purpose apart
 * from the product's own estimate (vendors/<vendor>/index.ts, read by vendors/resize.ts): the sim
 * is the vendor, so a test comparing the product's estimate with the sim's usage fields checks the
 * product against the published formulas, not against itself.
 */

/** Input tokens the vendor bills for one image of the size it received. */
export function vendorImageTokens(vendor: VendorName, received: Dimensions): number {
  return SIM_PROTOCOLS[vendor].imageTokens(received);
}
