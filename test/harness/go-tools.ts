/**
 * The Go-built test tools (stripe-mock, versitygw, promtool, oasdiff, oapi-codegen) and which test
 * files need them. `npm test` builds the missing ones in the background while the tests that need
 * none run (global-setup.ts); those files run last (sequencer.ts), and each waits, before its
 * first hook, for the tools it reaches (wait-for-tools.ts). docs/decisions.md, "Test run time".
 *
 * A test file needs a tool when it reaches the tool's module in tools/scripts through relative
 * imports (tools/scripts/import-graph.ts): the module that starts or runs it.
 */
import { fileURLToPath } from 'node:url';
import type { GoBuildOptions, GoTool } from '../../tools/scripts/go-tool.ts';
import { ImportGraph } from '../../tools/scripts/import-graph.ts';

export interface HarnessTool {
  name: string;
  /** The module of tools/scripts that starts or runs it. */
  module: string;
  /** The tool's pin (loaded only when asked: some of these modules import the Temporal client). */
  tool(): Promise<GoTool>;
  /** Built already, or not needed (Debian's promtool on PATH). */
  ready(): Promise<boolean>;
  /** Its path, building it when missing, or waiting for the process that is building it. */
  ensure(opts?: GoBuildOptions): Promise<string>;
  /**
   * Built beside the temporal CLI when both are missing; the others wait for the CLI's build, which
   * most of the suite waits for (global-setup.ts).
   */
  besideTemporalCli?: boolean;
}

const script = (name: string) => fileURLToPath(new URL(`../../tools/scripts/${name}`, import.meta.url));
const goTool = () => import('../../tools/scripts/go-tool.ts');

function built(name: string, file: string, pick: () => Promise<GoTool>): HarnessTool {
  return {
    name,
    module: script(file),
    tool: pick,
    ready: async () => (await goTool()).goToolBuilt(await pick()),
    ensure: async (opts) => (await goTool()).ensureGoTool(await pick(), process.env, opts),
  };
}

const promtool = () => import('../../tools/scripts/promtool.ts');

export const HARNESS_TOOLS: HarnessTool[] = [
  // The console's browser tests, among the first files to start once Temporal answers, need it; its
  // build is small (about 35 CPU-seconds).
  { ...built('stripe-mock', 'stripe-mock.ts', async () => (await import('../../tools/scripts/stripe-mock.ts')).STRIPE_MOCK), besideTemporalCli: true },
  built('versitygw', 's3-server.ts', async () => (await import('../../tools/scripts/s3-server.ts')).VERSITYGW),
  built('oasdiff', 'oasdiff.ts', async () => (await import('../../tools/scripts/oasdiff.ts')).OASDIFF),
  built('oapi-codegen', 'go-client.ts', async () => (await import('../../tools/scripts/go-client.ts')).OAPI_CODEGEN),
  {
    ...built('promtool', 'promtool.ts', async () => (await promtool()).PROMTOOL),
    // Debian's promtool is used when on PATH; only without it is Prometheus's built.
    ready: async () => (await (await promtool()).systemPromtool()) !== null || (await goTool()).goToolBuilt((await promtool()).PROMTOOL),
    ensure: async (opts) => (await (await promtool()).systemPromtool()) ?? (await goTool()).ensureGoTool((await promtool()).PROMTOOL, process.env, opts),
  },
];

/** The tools each of `testFiles` reaches (absolute paths in, the same paths as keys). */
export async function toolsOf(testFiles: string[], graph = new ImportGraph()): Promise<Map<string, HarnessTool[]>> {
  const result = new Map<string, HarnessTool[]>();
  for (const file of testFiles) {
    const reached = new Set(await graph.reachable(file));
    result.set(file, HARNESS_TOOLS.filter((t) => reached.has(t.module)));
  }
  return result;
}
