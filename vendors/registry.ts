import { VENDOR_NAMES, type VendorName } from '../core/vendor-names.ts';
import { loadFromFolders, type FolderPart } from './folders.ts';
import type { VendorPlugin } from './plugin.ts';

export type { VendorPlugin } from './plugin.ts';

/** A vendor's plug-in: `plugin`, exported by `vendors/<vendor>/index.ts`, each member checked as it loads. */
const PLUGIN: FolderPart<VendorPlugin> = {
  file: 'index.ts',
  exportName: 'plugin',
  nameKey: 'name',
  shape: {
    name: 'string',
    label: 'string',
    envPrefix: 'string',
    createClient: 'function',
    simPath: 'string',
    toSchema: 'function',
    billedSize: 'function',
    imageTokens: 'function',
    limitedTokens: 'function',
  },
};

/**
 * The plug-ins of `names`, each from its folder (vendors/folders.ts): a name without
 * `vendors/<name>/index.ts` is refused, naming it.
 */
export function loadVendorPlugins<N extends string>(names: readonly N[]): Promise<Readonly<Record<N, VendorPlugin>>> {
  return loadFromFolders(names, PLUGIN, (name) => import(`./${name}/index.ts`));
}

/**
 * The vendor registry: each vendor's plug-in (its folder, `vendors/<vendor>/`), keyed by the names
 * of core/vendor-names.ts (the one list of names: config, workflow, activities, log redaction and
 * simulator derive from it), loaded by name, so no vendor is listed here. Each plug-in was checked
 * to name its own folder, which makes the per-name type below hold. Nothing a vendor's folder
 * imports may reach this module: it awaits that folder (the `vendor-folder-not-registry` rule,
 * .dependency-cruiser.cjs). docs/architecture.md, "Adding a vendor", lists what a new vendor touches.
 */
export const VENDOR_REGISTRY = (await loadVendorPlugins(VENDOR_NAMES)) as { readonly [V in VendorName]: VendorPlugin<V> };

/** The registry's plug-ins in the order of core/vendor-names.ts. */
export const VENDOR_PLUGINS: readonly VendorPlugin[] = VENDOR_NAMES.map((v) => VENDOR_REGISTRY[v]);
