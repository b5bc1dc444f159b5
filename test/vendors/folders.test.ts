import { describe, expect, it } from 'vitest';
import { VENDOR_NAMES } from '../../core/vendor-names.ts';
import { SIM_PROTOCOLS, loadSimProtocols } from '../../tools/sim/protocols/index.ts';
import { loadFromFolders, type FolderPart } from '../../vendors/folders.ts';
import type { VendorPlugin } from '../../vendors/plugin.ts';
import { VENDOR_REGISTRY, loadVendorPlugins } from '../../vendors/registry.ts';

/**
 * A vendor is a folder named by core/vendor-names.ts, and both registries load it by that name
 * (vendors/folders.ts; docs/architecture.md, "Adding a vendor"). A name without its folder, or a
 * folder whose part is not what the registry reads, stops the load naming the file, rather than
 * failing later at the first call.
 */

/** The registry's own part description, as vendors/registry.ts has it. */
const plugin = (over: Partial<FolderPart<VendorPlugin>> = {}): FolderPart<VendorPlugin> => ({
  file: 'index.ts',
  exportName: 'plugin',
  nameKey: 'name',
  shape: {
    name: 'string', label: 'string', envPrefix: 'string', createClient: 'function', simPath: 'string',
    toSchema: 'function', billedSize: 'function', imageTokens: 'function', limitedTokens: 'function',
  },
  ...over,
});
const importPlugin = (name: string) => import(`../../vendors/${name}/index.ts`);

describe('vendors load from their folders by name', () => {
  it('a name without its folder is refused, naming the name and the missing file', async () => {
    await expect(loadVendorPlugins(['openai', 'mistral'])).rejects.toThrow(
      'core/vendor-names.ts names the vendor "mistral", but vendors/mistral/index.ts does not exist',
    );
    await expect(loadSimProtocols(['google', 'mistral'])).rejects.toThrow(
      'core/vendor-names.ts names the vendor "mistral", but vendors/mistral/simulator.ts does not exist',
    );
    // A name that is not a folder's (a path, upper case) is refused before any file is looked up.
    await expect(loadVendorPlugins(['../core'])).rejects.toThrow('names the vendor "../core", which is not a folder\'s name');
    await expect(loadVendorPlugins(['OpenAI'])).rejects.toThrow('names the vendor "OpenAI", which is not a folder\'s name');
  });

  it("the registries are the names' folders, in the names' order, each part naming its own folder", async () => {
    expect(Object.keys(VENDOR_REGISTRY)).toEqual([...VENDOR_NAMES]);
    expect(Object.keys(SIM_PROTOCOLS)).toEqual([...VENDOR_NAMES]);
    for (const v of VENDOR_NAMES) {
      const own = await import(`../../vendors/${v}/index.ts`);
      expect(VENDOR_REGISTRY[v]).toBe(own.plugin);
      expect(VENDOR_REGISTRY[v].name).toBe(v);
      const sim = await import(`../../vendors/${v}/simulator.ts`);
      expect(SIM_PROTOCOLS[v]).toBe(sim.protocol);
      expect(SIM_PROTOCOLS[v].vendor).toBe(v);
    }
    // Loaded again for a list of one, the same modules: the registry is no copy.
    const again = await loadVendorPlugins(['google']);
    expect(Object.keys(again)).toEqual(['google']);
    expect(again.google).toBe(VENDOR_REGISTRY.google);
  });

  it("a folder whose export is missing, of the wrong kind or another vendor's is refused, naming the file", async () => {
    await expect(loadFromFolders(['openai'], plugin({ exportName: 'protocol' }), importPlugin)).rejects.toThrow(
      'vendors/openai/index.ts exports no `protocol`',
    );
    // The plug-in's members, checked by kind: one the part requires as another kind is named.
    const shape = { ...plugin().shape, label: 'function', simPath: 'number' } as const;
    await expect(loadFromFolders(['anthropic'], plugin({ shape }), importPlugin)).rejects.toThrow(
      "vendors/anthropic/index.ts: `plugin`'s label is string, not a function; simPath is string, not a number",
    );
    // A member marked optional (`?`) may be absent, but is checked when present.
    const optional = (extra: Record<string, string>) => ({ ...plugin().shape, ...extra }) as FolderPart<VendorPlugin>['shape'];
    const withOptional = await loadFromFolders(['google'], plugin({ shape: optional({ absent: 'function?' }) }), importPlugin);
    expect(withOptional.google).toBe(VENDOR_REGISTRY.google);
    await expect(loadFromFolders(['google'], plugin({ shape: optional({ label: 'function?' }) }), importPlugin)).rejects.toThrow(
      "vendors/google/index.ts: `plugin`'s label is string, not a function",
    );
    // The member naming the vendor must name its folder: a folder holding another vendor's part is refused.
    await expect(loadFromFolders(['openai'], plugin({ nameKey: 'label' }), importPlugin)).rejects.toThrow(
      'vendors/openai/index.ts: `plugin.label` is "OpenAI", not its folder\'s name "openai"',
    );
  });
});
