/**
 * The files a TypeScript module reaches through relative imports, read from the sources without
 * compiling them: what the workflow bundle is built from (tools/scripts/workflow-bundle.ts) and
 * which test files start a Go-built test tool (test/harness/go-tools.ts).
 *
 * `import type … from` and `export type … from` are left out: TypeScript erases them, so they
 * load nothing. Anything else that names a relative path counts (static and dynamic imports,
 * re-exports, `import { type X }`); a match inside a comment only adds a file, never loses one.
 */
import { readFile, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';

// import … from '…', export … from '…', import '…', import('…'): relative specifiers only.
const RELATIVE_IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;
// `import type { … } from '…'` / `export type { … } from '…'`: erased by TypeScript.
const TYPE_ONLY = /\b(?:import|export)\s+type\s[^;'"]*?from\s*['"][^'"]+['"]/g;

/** The relative imports of one file, resolved to existing files; memoized per graph. */
export class ImportGraph {
  private readonly imports = new Map<string, Promise<string[]>>();

  /** The files `entries` reach, themselves included, sorted. */
  async reachable(...entries: string[]): Promise<string[]> {
    const seen = new Set<string>();
    const queue = entries.map((e) => resolve(e));
    while (queue.length > 0) {
      const file = queue.pop()!;
      if (seen.has(file)) continue;
      seen.add(file);
      for (const next of await this.importsOf(file)) if (!seen.has(next)) queue.push(next);
    }
    return [...seen].sort();
  }

  private importsOf(file: string): Promise<string[]> {
    let found = this.imports.get(file);
    if (!found) {
      found = (async () => {
        const text = (await readFile(file, 'utf8')).replace(TYPE_ONLY, '');
        const targets = await Promise.all([...text.matchAll(RELATIVE_IMPORT)].map((m) => existing(resolve(dirname(file), m[1]!))));
        return [...new Set(targets.filter((t): t is string => t !== null))];
      })();
      this.imports.set(file, found);
    }
    return found;
  }
}

async function existing(path: string): Promise<string | null> {
  for (const candidate of [path, `${path}.ts`, join(path, 'index.ts')]) {
    if (await stat(candidate).then((s) => s.isFile(), () => false)) return candidate;
  }
  return null;
}
