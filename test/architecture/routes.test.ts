import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cruise, type ICruiseOptions } from 'dependency-cruiser';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * No SQL in routes (docs/architecture.md "Where each concern lives"): the API's and the console's
 * route modules call the module that owns each table. Two checks, each closing what the other
 * cannot see:
 * - dependency-cruiser (`routes-no-database` in .dependency-cruiser.cjs): a route imports neither
 *   `db/` nor the Postgres driver, so it cannot open a pool or a transaction of its own;
 * - the text of every route module, read as TypeScript (comments do not count, strings do): the
 *   pool the route is handed (`deps.db`) is never queried — no `.query` but the request's query
 *   string (`request.query`), not as `['query']`, not destructured, not called bare — and no string
 *   or template holds an SQL statement.
 */
const ROUTE_DIRS = ['api/routes', 'web/routes'];

const SQL = /\b(select\b[\s\S]*\bfrom\b|insert\s+into\b|update\s+[\w."]+\s+set\b|delete\s+from\b|with\s+\w+\s+as\s*\(|(create|alter|drop)\s+(table|index|view)\b|truncate\s+\w)/i;

/** What in `source` (a route module's text) reaches the database by itself, one line each. */
export function sqlInRoute(source: string, file = 'route.ts'): string[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const problems: string[] = [];
  const at = (node: ts.Node, what: string) => problems.push(`${file}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}: ${what}`);
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      if (SQL.test(node.text)) at(node, `SQL in a string: ${node.text.slice(0, 60)}`);
    } else if (ts.isTemplateExpression(node)) {
      const text = [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join('${…}');
      if (SQL.test(text)) at(node, `SQL in a template: ${text.slice(0, 60)}`);
    } else if (ts.isPropertyAccessExpression(node) && node.name.text === 'query') {
      const called = ts.isCallExpression(node.parent) && node.parent.expression === node;
      if (node.expression.getText(sf) !== 'request' || called) at(node, `${node.getText(sf)}${called ? '(…)' : ''}: a database query`);
    } else if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression) && node.argumentExpression.text === 'query') {
      at(node, `${node.getText(sf)}: a database query`);
    } else if (ts.isBindingElement(node) && ((node.propertyName ?? node.name) as ts.Node).getText(sf) === 'query') {
      at(node, 'query destructured: a database query');
    } else if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'query') {
      at(node, 'query(…): a database query');
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return problems;
}

const require = createRequire(import.meta.url);
const config = require('../../.dependency-cruiser.cjs') as { forbidden: NonNullable<ICruiseOptions['ruleSet']>['forbidden']; options: ICruiseOptions };

describe('no SQL in routes', () => {
  const files = ROUTE_DIRS.flatMap((dir) => readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => join(dir, f)));

  it('no route module of the API or the console queries the database or holds SQL', () => {
    // Both doors have their routes split by area (an empty list would pass anything).
    expect(files.filter((f) => f.startsWith('api/')).length).toBeGreaterThan(10);
    expect(files.filter((f) => f.startsWith('web/')).length).toBeGreaterThan(10);
    expect(files.flatMap((f) => sqlInRoute(readFileSync(f, 'utf8'), f))).toEqual([]);
  });

  it('the text check catches each way a route could query on its own', () => {
    const cases: Array<[string, string]> = [
      ['pool call', "await deps.db.query('SELECT 1 FROM photos WHERE id = $1', [id]);"],
      ['typed call on a client', "const c = await deps.db.connect(); await c.query<{ n: number }>(sql);"],
      ['element access', "await deps.db['query'](text);"],
      ['destructured', 'const { query } = deps.db;'],
      ['bound', 'const run = deps.db.query.bind(deps.db);'],
      ['bare call', 'await query(text);'],
      ['SQL in a template', 'const text = `DELETE FROM console_users WHERE id = ${id}`;'],
      ['SQL across lines', "const text = 'select id\\n  from batches';"],
      ['an update', "const text = 'UPDATE users SET retention_days = $2';"],
      ['a CTE', 'const text = `WITH links AS (SELECT 1)`;'],
    ];
    for (const [what, code] of cases) expect(sqlInRoute(code), what).not.toEqual([]);
    // What routes do write stays allowed: the request's query string, prose in comments and messages.
    const allowed = [
      "const q = parse('query', requestsQuery, request.query); const after = request.query.after;",
      '// DELETE FROM nothing: a comment about SQL is no SQL.',
      "throw new AppError('NOT_FOUND', 'No such batch; select another one');",
      "app.delete('/api/v1/workspaces/:workspaceId/keys/:keyId', handler);",
    ];
    for (const code of allowed) expect(sqlInRoute(code), code).toEqual([]);
  });

  it('dependency-cruiser refuses a route importing the pool or the driver (its rule on a small tree of its own)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-routes-'));
    try {
      await mkdir(join(dir, 'db'));
      await mkdir(join(dir, 'web/routes'), { recursive: true });
      await mkdir(join(dir, 'accounts'));
      await writeFile(join(dir, 'db/pool.js'), 'export const createPool = () => ({});\n');
      await writeFile(join(dir, 'accounts/people.js'), "import { createPool } from '../db/pool.js';\nexport const people = () => createPool();\n");
      await writeFile(join(dir, 'web/routes/keys.js'), "import { createPool } from '../../db/pool.js';\nexport const keys = () => createPool();\n");
      await writeFile(join(dir, 'web/routes/people.js'), "import { people } from '../../accounts/people.js';\nexport const list = () => people();\n");
      const result = await cruise(['db', 'accounts', 'web'], { baseDir: dir, validate: true, ruleSet: { forbidden: config.forbidden } }, {});
      if (typeof result.output === 'string') throw new Error('expected a cruise result, got text');
      const v = result.output.summary.violations.map((x) => `${x.rule.name}: ${x.from} → ${x.to}`);
      // The route over the owner module passes; the one opening the pool is refused.
      expect(v).toEqual(['routes-no-database: web/routes/keys.js → db/pool.js']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
