/**
 * Prometheus's promtool, to check deploy/prometheus/prometheus.yml and the dashboards' PromQL.
 * Debian's `prometheus` package (.ci/run installs it: seconds) gives one on PATH; without it,
 * v0.305.0 (the Go module version of Prometheus 3.5.0, the image docker-compose.yml runs) is built
 * from source through the Go module proxy and cached (go-tool.ts: 10-20 minutes cold on 2 cores).
 * Debian bookworm's is 2.42: it knows every field and function the committed files use, and
 * test/operations/promtool.test.ts shows it refusing a broken expression.
 *
 *   npx tsx tools/scripts/promtool.ts     # prints the path (building it first when none is on PATH)
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ensureGoTool, type GoTool } from './go-tool.ts';
import { isMain } from './is-main.ts';

export const PROMTOOL: GoTool = { name: 'promtool', pkg: 'github.com/prometheus/prometheus/cmd/promtool', version: '0.305.0', scratchModule: true };

/** The oldest promtool on PATH we take instead of building one. */
const MIN_SYSTEM_VERSION = [2, 42] as const;

/** `promtool` on PATH when it is recent enough, else null. */
export async function systemPromtool(env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  try {
    const { stdout, stderr } = await promisify(execFile)('promtool', ['--version'], { env, timeout: 10_000 });
    const m = /version (\d+)\.(\d+)\./.exec(stdout + stderr);
    if (!m) return null;
    const [major, minor] = [Number(m[1]), Number(m[2])];
    const recent = major > MIN_SYSTEM_VERSION[0] || (major === MIN_SYSTEM_VERSION[0] && minor >= MIN_SYSTEM_VERSION[1]);
    return recent ? 'promtool' : null;
  } catch {
    return null;
  }
}

export const ensurePromtool = async (env: NodeJS.ProcessEnv = process.env): Promise<string> => (await systemPromtool(env)) ?? ensureGoTool(PROMTOOL, env);

if (isMain(import.meta.url)) console.log(await ensurePromtool());
