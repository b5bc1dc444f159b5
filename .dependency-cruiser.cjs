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

module.exports = {
  forbidden,
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|test|bench|tools|clients|examples|samples|web/ui)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
  },

};
