import { VENDOR_NAMES, type VendorName } from '../../../core/vendor-names.ts';
import { loadFromFolders, type FolderPart } from '../../../vendors/folders.ts';
import type { Protocol } from './common.ts';

/** A simulated vendor: `protocol`, exported by `vendors/<vendor>/simulator.ts`, each member checked as it loads. */
const PROTOCOL: FolderPart<Protocol> = {
  file: 'simulator.ts',
  exportName: 'protocol',
  nameKey: 'vendor',
  shape: {
    vendor: 'string',
    route: 'function',
    baseURLHint: 'string',
    hasKey: 'function',
    missingKeyStatus: 'number',
    imageTokens: 'function',
    cache: 'object',
    limitedTokens: 'function',
    withRetryDelay: 'function?',
    parse: 'function',
    success: 'function',
    error: 'function',
  },
};

/**
 * The simulated vendors of `names`, each from its folder (vendors/folders.ts): a name without
 * `vendors/<name>/simulator.ts` is refused, naming it.
 */
export function loadSimProtocols<N extends string>(names: readonly N[]): Promise<Readonly<Record<N, Protocol>>> {
  return loadFromFolders(names, PROTOCOL, (name) => import(`../../../vendors/${name}/simulator.ts`));
}

/**
 * The simulated vendors, keyed by the names of core/vendor-names.ts and loaded by name from each
 * vendor's folder (`vendors/<vendor>/simulator.ts`): the server, its billing and its prompt cache
 * read a vendor's part here and never name a vendor (docs/architecture.md, "Adding a vendor").
 * The simulator is the vendors' stand-in, not product code: the product never imports it, and
 * this module, in tools/, is the only one that loads a simulator file.
 */
export const SIM_PROTOCOLS = (await loadSimProtocols(VENDOR_NAMES)) as { readonly [V in VendorName]: Protocol<V> };
