/**
 * Prometheus's promtool, built from source through the Go module proxy and cached (go-tool.ts), to
 * check deploy/prometheus/prometheus.yml and the dashboards' PromQL. v0.305.0 is the Go module
 * version of Prometheus 3.5.0, the image docker-compose.yml runs.
 *
 *   npx tsx tools/scripts/promtool.ts     # prints the path, building it first (10-20 min cold)
 */
import { ensureGoTool, type GoTool } from './go-tool.ts';
import { isMain } from './is-main.ts';

export const PROMTOOL: GoTool = { name: 'promtool', pkg: 'github.com/prometheus/prometheus/cmd/promtool', version: '0.305.0', scratchModule: true };

export const ensurePromtool = (env: NodeJS.ProcessEnv = process.env): Promise<string> => ensureGoTool(PROMTOOL, env);

if (isMain(import.meta.url)) console.log(await ensurePromtool());
