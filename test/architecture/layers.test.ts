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
const config = require('../../.dependency-cruiser.cjs') as { forbidden: NonNullable<ICruiseOptions['ruleSet']>['forbidden']; options: ICruiseOptions };
const PRODUCT = ['accounts', 'activities', 'analysis', 'api', 'auth', 'batches', 'bespoke', 'core', 'credits', 'db', 'enrich', 'exports', 'images', 'lenses', 'metrics', 'payments', 'ratelimit', 'registry', 'uploads', 'vendors', 'web', 'worker', 'workflows'];

async function violations(files: string[], options: ICruiseOptions, tsConfig?: string): Promise<IViolation[] & { cruised: number; dependencies: number }> {
  const tsOptions = tsConfig ? { tsConfig: extractTSConfig(tsConfig) } : {};
  const result = await cruise(files, { ...options, validate: true, ruleSet: { forbidden: config.forbidden } }, {}, tsOptions);
  if (typeof result.output === 'string') throw new Error('expected a cruise result, got text');
  const { summary } = result.output;
  return Object.assign(summary.violations, { cruised: summary.totalCruised, dependencies: summary.totalDependenciesCruised ?? 0 });
}

const described = (v: IViolation[]) => v.map((x) => `${x.rule.name}: ${x.from} → ${x.to}`);

describe('layers', () => {
  it('every product folder imports only the layers below it, and nothing imports in a circle', async () => {
    const v = await violations(PRODUCT, config.options, 'tsconfig.json');
    expect(described(v)).toEqual([]);
    // It read the product (TypeScript imports resolved), not an empty tree.
    expect(v.cruised).toBeGreaterThan(250);
    expect(v.dependencies).toBeGreaterThan(1000);
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
});
