import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenApiDocument } from '../../api/openapi.ts';
import { baselineDocument, breakingChanges, ensureOasdiff, IGNORE_FILE } from '../../tools/scripts/oasdiff.ts';
import { OPENAPI_FILES, REPO_ROOT } from '../../tools/scripts/openapi.ts';

// oasdiff is built from source the first time (CI builds it in its own step, before the tests).
let dir: string;
let current: OpenApiDocument;
/** The released contract openapi/baseline.ref names, as `git show` gives it (test/tools/openapi-baseline-ref.test.ts). */
let baseline: string;
beforeAll(async () => {
  await ensureOasdiff();
  dir = await mkdtemp(join(tmpdir(), 'lenstack-oasdiff-'));
  current = JSON.parse(await readFile(join(REPO_ROOT, OPENAPI_FILES.public), 'utf8')) as OpenApiDocument;
  baseline = join(dir, 'baseline.json');
  await writeFile(baseline, (await baselineDocument()).text);
}, 15 * 60_000);
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function changed(name: string, change: (doc: OpenApiDocument) => void): Promise<string> {
  const doc = structuredClone(current);
  change(doc);
  const file = join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify(doc));
  return file;
}

const ignoreFile = join(REPO_ROOT, IGNORE_FILE);

describe('the breaking-change check (oasdiff against the baseline openapi/baseline.ref names)', () => {
  it('passes the committed document: its breaks from the baseline are all reviewed in the ignore file', async () => {
    const result = await breakingChanges(baseline, join(REPO_ROOT, OPENAPI_FILES.public), { ignoreFile });
    expect(result.code, result.output).toBe(0);
  });

  it('lets a break through only when the ignore file lists it, with its reason', async () => {
    const file = await changed('no-enrich', (doc) => delete doc.paths['/v2/enrich']);
    const refused = await breakingChanges(baseline, file, { ignoreFile });
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(/api-path-removed-without-deprecation[^\n]*\n\s*in API POST \/v2\/enrich/);
    const reviewed = join(dir, 'reviewed-ignore.txt');
    await writeFile(reviewed, `${await readFile(ignoreFile, 'utf8')}POST /v2/enrich api path removed without deprecation: a reviewed removal (this test)\n`);
    const accepted = await breakingChanges(baseline, file, { ignoreFile: reviewed });
    expect(accepted.code, accepted.output).toBe(0);
  });

  it('fails when an operation is removed', async () => {
    const file = await changed('no-analyze', (doc) => delete doc.paths['/v1/analyze']);
    const result = await breakingChanges(baseline, file, { ignoreFile });
    expect(result.code).toBe(1);
    expect(result.output).toMatch(/api-path-removed-without-deprecation[^\n]*\n\s*in API POST \/v1\/analyze/);
  });

  it('fails when a required response field is removed', async () => {
    const file = await changed('no-usage', (doc) => {
      const analysis = doc.components.schemas!.Analysis as { properties: Record<string, unknown>; required: string[] };
      delete analysis.properties.usage;
      analysis.required = analysis.required.filter((f) => f !== 'usage');
    });
    const result = await breakingChanges(baseline, file, { ignoreFile });
    expect(result.code).toBe(1);
    expect(result.output).toContain('response-required-property-removed');
    expect(result.output).toContain('usage');
  });

  it('passes an additive change: a new optional request field', async () => {
    const file = await changed('new-field', (doc) => {
      const body = doc.components.schemas!.AnalyzeRequest as { properties: Record<string, unknown> };
      body.properties.note = { type: 'string', maxLength: 100 };
    });
    const result = await breakingChanges(baseline, file, { ignoreFile });
    expect(result.code, result.output).toBe(0);
  });
});
