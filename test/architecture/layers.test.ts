import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cruise, type ICruiseOptions, type IViolation } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { describe, expect, it } from 'vitest';

/**
 * The one-way layers of docs/architecture.md ("Layers"), kept by dependency-cruiser with the rules
 * in .dependency-cruiser.cjs: every product folder imports only folders below it, and nothing
 * imports in a circle.
 */
const require = createRequire(import.meta.url);
type Rule = { name: string; from: { path?: string | string[] }; to: { path?: string | string[] } };
const config = require('../../.dependency-cruiser.cjs') as { forbidden: Rule[]; options: ICruiseOptions };
/** Top-level folders that are not the product (callers, tooling, tests, documents). */
const NOT_PRODUCT = new Set(['bench', 'clients', 'deploy', 'docs', 'examples', 'node_modules', 'openapi', 'samples', 'test', 'tools']);
/** Every other top-level folder holding TypeScript is product, and must have its place in the layers. */
const PRODUCT = readdirSync('.', { withFileTypes: true })
  .filter((d) => d.isDirectory() && !d.name.startsWith('.') && !NOT_PRODUCT.has(d.name))
  .filter((d) => readdirSync(d.name, { recursive: true }).some((f) => String(f).endsWith('.ts')))
  .map((d) => d.name)
  .sort();

async function violations(files: string[], options: ICruiseOptions, tsConfig?: string): Promise<IViolation[] & { cruised: number; dependencies: number }> {
  const tsOptions = tsConfig ? { tsConfig: extractTSConfig(tsConfig) } : {};
  const result = await cruise(files, { ...options, validate: true, ruleSet: { forbidden: config.forbidden as NonNullable<ICruiseOptions['ruleSet']>['forbidden'] } }, {}, tsOptions);
  if (typeof result.output === 'string') throw new Error('expected a cruise result, got text');
  const { summary } = result.output;
  return Object.assign(summary.violations, { cruised: summary.totalCruised, dependencies: summary.totalDependenciesCruised ?? 0 });
}

const described = (v: IViolation[]) => v.map((x) => `${x.rule.name}: ${x.from} → ${x.to}`);

describe('layers', () => {
  it('every product folder has its place in the layers (a new folder must be given one)', () => {
    const placed = config.forbidden.flatMap((r) => [r.from, r.to].flatMap((side) => ([] as string[]).concat(side.path ?? [])));
    const unplaced = PRODUCT.filter((folder) => !placed.some((pattern) => pattern.startsWith(`^${folder}/`) || pattern.startsWith(`^${folder}\\/`)));
    expect(PRODUCT.length).toBeGreaterThan(20);
    expect(unplaced).toEqual([]);
  });

  it('every product folder imports only the layers below it, and nothing imports in a circle', async () => {
    const v = await violations(PRODUCT, config.options, 'tsconfig.json');
    expect(described(v)).toEqual([]);
    // It read the product (TypeScript imports resolved), not an empty tree.
    expect(v.cruised).toBeGreaterThan(200);
    expect(v.dependencies).toBeGreaterThan(800);
  }, 60_000);

  it('the rules catch an upward import and a circle (the same rules on a small tree of their own)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-layers-'));
    try {
      await mkdir(join(dir, 'registry'));
      await mkdir(join(dir, 'batches'));
      await mkdir(join(dir, 'workflows'));
      await mkdir(join(dir, 'activities'));
      await writeFile(join(dir, 'batches/items.js'), "import { photo } from '../registry/photos.js';\nexport const item = () => photo;\n");
      // Upward: the registry reaching into batches (and with it, a circle).
      await writeFile(join(dir, 'registry/photos.js'), "import { item } from '../batches/items.js';\nexport const photo = () => item;\n");
      // Workflows may name the activities' types, never import their code.
      await writeFile(join(dir, 'activities/index.js'), 'export const createActivities = () => ({});\n');
      await writeFile(join(dir, 'workflows/steps.js'), "import { createActivities } from '../activities/index.js';\nexport const steps = createActivities;\n");
      const v = await violations(['registry', 'batches', 'workflows', 'activities'], { baseDir: dir, doNotFollow: { path: 'node_modules' } });
      expect(described(v).sort()).toEqual([
        'layer-registry: registry/photos.js → batches/items.js',
        'layer-workflows-activity-types: workflows/steps.js → activities/index.js',
        'no-circular: batches/items.js → registry/photos.js',
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("the vendor folder rules catch what the registries' import() hides (a small tree of their own)", async () => {
    // docs/architecture.md, "Adding a vendor": the registries load vendors/<vendor>/index.ts and
    // simulator.ts by name, so no cruise sees those imports; these rules keep the rest in line.
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-vendor-folders-'));
    try {
      await mkdir(join(dir, 'vendors/acme'), { recursive: true });
      await mkdir(join(dir, 'tools/sim/protocols'), { recursive: true });
      await writeFile(join(dir, 'tools/sim/protocols/common.ts'), 'export const shared = 1;\n');
      await writeFile(join(dir, 'vendors/registry.ts'), 'export const REGISTRY = {};\n');
      // A plug-in reaching the registry that awaits it, through a shared module.
      await writeFile(join(dir, 'vendors/resize.ts'), "import { REGISTRY } from './registry.ts';\nexport const size = () => REGISTRY;\n");
      await writeFile(join(dir, 'vendors/acme/index.ts'), "import { size } from '../resize.ts';\nexport const plugin = { size };\n");
      // A simulated vendor reading the plug-in beside it (its billing would be the product's own).
      await writeFile(
        join(dir, 'vendors/acme/simulator.ts'),
        "import { plugin } from './index.ts';\nimport { shared } from '../../tools/sim/protocols/common.ts';\nexport const protocol = { plugin, shared };\n",
      );
      // Product modules importing a simulated vendor, and the simulator's code.
      await writeFile(join(dir, 'vendors/budget.ts'), "import { protocol } from './acme/simulator.ts';\nexport const budget = protocol;\n");
      await writeFile(join(dir, 'vendors/settings.ts'), "import { shared } from '../tools/sim/protocols/common.ts';\nexport const settings = shared;\n");
      const v = await violations(['vendors', 'tools'], { baseDir: dir, doNotFollow: { path: 'node_modules' } });
      expect(described(v).sort()).toEqual([
        'product-not-simulator: vendors/budget.ts → vendors/acme/simulator.ts',
        'product-not-tools: vendors/settings.ts → tools/sim/protocols/common.ts',
        'simulator-apart: vendors/acme/simulator.ts → vendors/acme/index.ts',
        'vendor-folder-not-registry: vendors/acme/index.ts → vendors/registry.ts',
        'vendor-folder-not-registry: vendors/acme/simulator.ts → vendors/registry.ts',
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
