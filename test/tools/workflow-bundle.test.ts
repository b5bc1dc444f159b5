import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { WORKFLOW_BUNDLE_CACHE, WORKFLOWS_ENTRY, workflowBundleKey, workflowSources } from '../../tools/scripts/workflow-bundle.ts';
import { WORKFLOWS_PATH } from '../../worker/main.ts';
import { workflowBundle } from '../helpers/pipeline.ts';

/**
 * The workflow code is bundled once per run by the harness and cached under a hash of what it is
 * built from (tools/scripts/workflow-bundle.ts; docs/decisions.md, "Test run time"): a stale
 * bundle would test old workflow code, so the key must follow every file the bundle holds.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const scratch: string[] = [];
afterAll(async () => {
  for (const dir of scratch) await rm(dir, { recursive: true, force: true });
});

describe('the workflow bundle', () => {
  it("is built from the worker's workflows and what they import at run time, not what they name only as types", async () => {
    expect(WORKFLOWS_ENTRY).toBe(WORKFLOWS_PATH);
    const files = (await workflowSources()).map((f) => relative(ROOT, f));
    for (const f of ['workflows/index.ts', 'workflows/batch.ts', 'workflows/analyze.ts', 'workflows/steps.ts', 'core/map-bounded.ts', 'credits/price-book.ts']) {
      expect(files).toContain(f);
    }
    // `import type { Activities } from '../activities/index.ts'`: erased, the activities are not bundled.
    expect(files.filter((f) => f.startsWith('activities/'))).toEqual([]);
  });

  it('has a key that changes with a file it reaches and with the installed packages, not with a type-only import', async () => {
    const root = await mkdtemp(join(tmpdir(), 'lenstack-bundle-key-'));
    scratch.push(root);
    await mkdir(join(root, 'w'));
    await mkdir(join(root, 'node_modules'));
    const entry = join(root, 'w/index.ts');
    await writeFile(entry, "import { a } from './a.ts';\nimport type { T } from '../t.ts';\nexport { b } from './b.ts';\nexport const x: T = a;\n");
    await writeFile(join(root, 'w/a.ts'), 'export const a = 1;\n');
    await writeFile(join(root, 'w/b.ts'), 'export const b = 2;\n');
    await writeFile(join(root, 't.ts'), 'export type T = number;\n');
    await writeFile(join(root, 'node_modules/.package-lock.json'), '{"packages":{"node_modules/@temporalio/workflow":{"version":"1.24.0"}}}');
    const key = () => workflowBundleKey(entry, root);

    const first = await key();
    expect(await key()).toBe(first);
    await writeFile(join(root, 't.ts'), 'export type T = 1 | 2;\n');
    expect(await key()).toBe(first);
    await writeFile(join(root, 'w/b.ts'), 'export const b = 3;\n');
    const second = await key();
    expect(second).not.toBe(first);
    await writeFile(join(root, 'node_modules/.package-lock.json'), '{"packages":{"node_modules/@temporalio/workflow":{"version":"1.24.1"}}}');
    expect(await key()).not.toBe(second);
  });

  it("the run's bundle is the one of the current sources, holds the three workflows, and is what every test file's workers load", async () => {
    const path = inject('workflowBundlePath');
    // The run's own copy of the cache's entry for the current key.
    expect(basename(path)).toBe(`lenstack-test-${inject('runId')}-workflows.js`);
    const code = await readFile(path, 'utf8');
    expect(await readFile(join(WORKFLOW_BUNDLE_CACHE, `${await workflowBundleKey()}.js`), 'utf8')).toBe(code);
    for (const name of ['analyzeWorkflow', 'batchWorkflow', 'vehicleReportWorkflow']) expect(code).toContain(name);
    expect((await workflowBundle()) as { code: string }).toEqual({ code });
  });
});
