import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * `test/` follows the product's folders (docs/architecture.md, "Where the tests are"): a test of
 * `registry/` lives in `test/registry/`, so a reader finds a module's tests where the module is.
 * Besides those, only the suites that cut across every folder and the tests' own support.
 */
const CROSS_CUTTING = new Set(['architecture', 'chaos', 'hostile', 'operations', 'security']);
const SUPPORT = new Set(['fixtures', 'harness', 'helpers']);
/** Top-level folders whose tests mirror them: the product, the callers and the tooling. */
const MIRRORED = readdirSync('.', { withFileTypes: true })
  .filter((d) => d.isDirectory() && !d.name.startsWith('.') && !['node_modules', 'docs', 'test', 'openapi', 'deploy', 'samples', 'examples', 'bench'].includes(d.name))
  .map((d) => d.name);

describe('the tests mirror the house', () => {
  it('each folder of test/ is a product, client or tools folder, a cross-cutting suite or test support', () => {
    const folders = readdirSync('test', { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    const strays = folders.filter((f) => !MIRRORED.includes(f) && !CROSS_CUTTING.has(f) && !SUPPORT.has(f));
    expect(MIRRORED).toContain('registry');
    expect(folders.length).toBeGreaterThan(20);
    expect(strays).toEqual([]);
  });

  it('no test file sits at the top of test/', () => {
    const loose = readdirSync('test', { withFileTypes: true }).filter((d) => d.isFile() && d.name.endsWith('.test.ts')).map((d) => d.name);
    expect(loose).toEqual([]);
  });
});
