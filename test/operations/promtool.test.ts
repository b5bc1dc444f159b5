import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ensurePromtool } from '../../tools/scripts/promtool.ts';
import { loadDashboards } from '../helpers/dashboards.ts';

// Prometheus's own checker on the committed observability config (built and cached by
// tools/scripts/promtool.ts; .ci/run builds it before the tests, a cold build takes minutes).
const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let promtool: string;
let scratch: string;
beforeAll(async () => {
  promtool = await ensurePromtool();
  scratch = await mkdtemp(join(tmpdir(), 'lenstack-promtool-'));
}, 900_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

/** promtool's exit code and output, whether it passed or not. */
async function promtoolSays(args: string[]): Promise<{ code: number; output: string }> {
  try {
    const r = await run(promtool, args, { cwd: ROOT });
    return { code: 0, output: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, output: e.stdout + e.stderr };
  }
}

describe('promtool', () => {
  it('accepts deploy/prometheus/prometheus.yml (the secret file exists only inside the container)', async () => {
    const r = await promtoolSays(['check', 'config', '--syntax-only', 'deploy/prometheus/prometheus.yml']);
    expect(r.output).toContain('SUCCESS');
    expect(r.code).toBe(0);
  });

  it('parses every dashboard panel’s PromQL, and would refuse a broken one', async () => {
    const exprs = loadDashboards().flatMap((d) => d.panels.flatMap((p) => p.exprs));
    expect(exprs.length).toBeGreaterThan(30);
    // Each expression as a recording rule: `check rules` parses and type-checks its PromQL.
    const rules = (list: string[]) => stringify({ groups: [{ name: 'dashboards', rules: list.map((expr, i) => ({ record: `dashboard:expr_${i}`, expr })) }] });
    await writeFile(join(scratch, 'dashboards.rules.yml'), rules(exprs));
    const ok = await promtoolSays(['check', 'rules', '--lint=none', join(scratch, 'dashboards.rules.yml')]);
    expect(ok.output).toContain(`SUCCESS: ${exprs.length} rules found`);
    expect(ok.code).toBe(0);

    await writeFile(join(scratch, 'broken.rules.yml'), rules(['sum by (vendor) (rate(lenstack_vendor_calls_total[5m])']));
    const broken = await promtoolSays(['check', 'rules', '--lint=none', join(scratch, 'broken.rules.yml')]);
    expect(broken.code).not.toBe(0);
    expect(broken.output).toMatch(/FAILED/);
  });
});
