import { existsSync } from 'node:fs';

/**
 * A vendor is a folder, `vendors/<vendor>/`, named by core/vendor-names.ts (docs/architecture.md,
 * "Adding a vendor"). Its parts are loaded from the folder by that name, so no list of imports
 * names the vendors: the product's plug-in (`index.ts`, by vendors/registry.ts) and the simulated
 * vendor (`simulator.ts`, by the simulator's tools/sim/protocols/index.ts). Each part is checked as
 * it loads: a name without its folder, a folder without the export, a member of the wrong kind or
 * a part naming another vendor stops the process that loads it, naming the file.
 */

/** The kinds a member is checked for (`typeof`); `?` when the member may be absent. */
type Kind = 'string' | 'number' | 'function' | 'object';

/**
 * Every member of a part with its kind. Mapped over the part's type, so a member added to the
 * interface (vendors/plugin.ts, tools/sim/protocols/common.ts) does not compile until it is
 * checked here too.
 */
export type Shape<T> = { readonly [K in keyof T]-?: {} extends Pick<T, K> ? `${Kind}?` : Kind };

/** Where one part of each vendor is, and what it must be. */
export interface FolderPart<T> {
  /** Its file in each vendor's folder (`index.ts`, `simulator.ts`). */
  file: string;
  /** The export that is the part (`plugin`, `protocol`). */
  exportName: string;
  /** The member that spells the vendor's name, which must be its folder's. */
  nameKey: keyof T & string;
  shape: Shape<T>;
}

/** A folder's name: what core/vendor-names.ts may spell (no path, no upper case). */
const FOLDER_NAME = /^[a-z][a-z0-9-]*$/;

/**
 * The part of each of `names`, in their order. `load` is the caller's `import()` of one vendor's
 * file, written relative to the caller: vendors/registry.ts names only `index.ts`, so no product
 * module names a simulator file.
 */
export async function loadFromFolders<N extends string, T>(
  names: readonly N[],
  part: FolderPart<T>,
  load: (name: N) => Promise<Record<string, unknown>>,
): Promise<Readonly<Record<N, T>>> {
  const loaded = await Promise.all(
    names.map(async (name) => {
      if (!FOLDER_NAME.test(name)) {
        throw new Error(`core/vendor-names.ts names the vendor ${JSON.stringify(name)}, which is not a folder's name (lower-case letters, digits, dashes)`);
      }
      if (!existsSync(new URL(`./${name}/${part.file}`, import.meta.url))) {
        throw new Error(
          `core/vendor-names.ts names the vendor "${name}", but vendors/${name}/${part.file} does not exist: ` +
            'each vendor is a folder of its own (docs/architecture.md, "Adding a vendor")',
        );
      }
      return [name, checked(name, part, await load(name))] as const;
    }),
  );
  return Object.fromEntries(loaded) as Record<N, T>;
}

function checked<T>(name: string, part: FolderPart<T>, module: Record<string, unknown>): T {
  const file = `vendors/${name}/${part.file}`;
  const value = module[part.exportName];
  if (typeof value !== 'object' || value === null) {
    throw new Error(`${file} exports no \`${part.exportName}\` (docs/architecture.md, "Adding a vendor")`);
  }
  const members = value as Record<string, unknown>;
  const wrong = Object.entries(part.shape as Record<string, string>).flatMap(([key, kind]) => {
    const optional = kind.endsWith('?');
    const want = optional ? kind.slice(0, -1) : kind;
    const got = members[key];
    if (optional && got === undefined) return [];
    return typeof got === want && got !== null ? [] : [`${key} is ${got === null ? 'null' : typeof got}, not a ${want}`];
  });
  if (wrong.length > 0) throw new Error(`${file}: \`${part.exportName}\`'s ${wrong.join('; ')}`);
  if (members[part.nameKey] !== name) {
    throw new Error(`${file}: \`${part.exportName}.${part.nameKey}\` is ${JSON.stringify(members[part.nameKey])}, not its folder's name "${name}"`);
  }
  return value as T;
}
