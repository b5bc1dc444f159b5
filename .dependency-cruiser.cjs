/**
 * The product's layers, bottom to top (docs/architecture.md, "Layers"). A folder imports only
 * folders listed before it: a dependency points down, never up, so no two folders import each
 * other and no import circle can form. `npm test` checks it (test/architecture/layers.test.ts);
 * `npx depcruise --config .dependency-cruiser.cjs <folders…>` shows the same from a shell.
 *
 * Two deliberate allowances:
 * - `workflows/types.ts` is the contract between the workflows and everything that starts them or
 *   runs their steps (pure types and constants, safe in the workflow sandbox): it sits at the
 *   bottom, apart from the rest of `workflows/`.
 * - `workflows/` imports the activities' *types* (Temporal's typed proxies, erased at compile time
 *   and never bundled into the workflow sandbox); never their code.
 */
const LAYERS = [
  'core',
  'db',
  'requestlog',
  'metrics',
  'ratelimit',
  'workflows/types\\.ts',
  'auth',
  'bespoke',
  'images',
  'lenses',
  'exports',
  'credits',
  'vendors',
  'registry',
  'uploads',
  'enrich',
  'accounts',
  'payments',
  'workflows',
  'analysis',
  'batches',
  'activities',
  'worker',
  'api',
  'web',
];

/** The path pattern of a layer (the contract file is matched as a file, folders by their prefix). */
const pathOf = (layer) => (layer.endsWith('\\.ts') ? `^${layer}$` : `^${layer}/`);
/** A module of `workflows/` other than the contract. */
const WORKFLOWS_CODE = '^workflows/(?!types\\.ts$)';

const forbidden = [
  { name: 'no-circular', comment: 'An import circle, of code or of types.', severity: 'error', from: {}, to: { circular: true, dependencyTypesNot: ['type-only'] } },
];
/** A layer's modules as a `to` pattern (`workflows/` above the contract: its code only). */
const toPath = (layer) => (layer === 'workflows' ? WORKFLOWS_CODE : pathOf(layer));
const plain = (layer) => layer.replace('\\', '');
LAYERS.forEach((layer, i) => {
  const above = LAYERS.slice(i + 1);
  if (!above.length) return;
  const from = { path: toPath(layer) };
  const comment = `${plain(layer)} imports only layers below it (${LAYERS.slice(0, i).map(plain).join(', ') || 'none'})`;
  if (layer !== 'workflows') {
    forbidden.push({ name: `layer-${plain(layer)}`, comment, severity: 'error', from, to: { path: above.map(toPath) } });
    return;
  }
  forbidden.push({ name: 'layer-workflows', comment, severity: 'error', from, to: { path: above.filter((l) => l !== 'activities').map(toPath) } });
  forbidden.push({ name: 'layer-workflows-activity-types', comment: 'workflows import the activities\' types only (typed proxies), never their code', severity: 'error', from, to: { path: pathOf('activities'), dependencyTypesNot: ['type-only'] } });
});

/**
 * Routes hold no SQL (docs/architecture.md "Where each concern lives"): the API's and the console's
 * route modules reach the database only through the module that owns each table, never through the
 * pool or the driver. test/architecture/routes.test.ts checks their text besides (no `.query(` call,
 * no SQL statement in a string).
 */
forbidden.push({
  name: 'routes-no-database',
  comment: 'api/routes and web/routes call the owner modules (accounts/, batches/, registry/, requestlog/, credits/ …), never db/ or the Postgres driver',
  severity: 'error',
  from: { path: '^(api|web)/routes/' },
  to: { path: ['^db/', '^node_modules/(pg|pg-pool|pg-protocol|postgres)/', '^(pg|pg-pool)$'] },
});

/**
 * A vendor is a folder (docs/architecture.md, "Adding a vendor"): its plug-in, `index.ts` (product),
 * and its simulated vendor, `simulator.ts` (the simulator's, not product). The two registries load
 * them by name with `import()` (vendors/registry.ts, tools/sim/protocols/index.ts), which
 * dependency-cruiser does not follow, so these rules keep what the imports between them must be:
 * - the product imports no simulated vendor, and nothing of tools/ (a simulated vendor imports the
 *   simulator's shared part);
 * - a simulated vendor imports nothing but that shared part (tools/sim/protocols/common.ts): what it
 *   bills stays its own reading of the vendor's rules, apart from the plug-in beside it, and it
 *   cannot reach the simulator's registry, which loads it;
 * - nothing a vendor's folder imports reaches vendors/registry.ts: the registry awaits the folder's
 *   import, so a way back would leave both waiting for ever.
 */
const SIMULATOR = '^vendors/[^/]+/simulator\\.ts$';
forbidden.push(
  { name: 'product-not-simulator', comment: 'the product never imports a simulated vendor (vendors/<vendor>/simulator.ts): only the simulator loads it', severity: 'error', from: { pathNot: SIMULATOR }, to: { path: SIMULATOR } },
  { name: 'product-not-tools', comment: 'the product never imports tools/', severity: 'error', from: { pathNot: SIMULATOR }, to: { path: '^tools/' } },
  { name: 'simulator-apart', comment: "a simulated vendor imports only the simulator's shared part, tools/sim/protocols/common.ts (and node's own modules)", severity: 'error', from: { path: SIMULATOR }, to: { pathNot: '^tools/sim/protocols/common\\.ts$', dependencyTypesNot: ['core'] } },
  { name: 'vendor-folder-not-registry', comment: "nothing a vendor's folder imports reaches vendors/registry.ts, which awaits the folder's import", severity: 'error', from: { path: '^vendors/[^/]+/' }, to: { path: '^vendors/registry\\.ts$', reachable: true } },
);

module.exports = {
  forbidden,
  options: {
    // tools/ is seen but not followed, so that a product module importing it is caught (product-not-tools).
    doNotFollow: { path: ['node_modules', '^tools/'] },
    exclude: { path: '^(node_modules|test|bench|clients|examples|samples|web/ui)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
  },

};
