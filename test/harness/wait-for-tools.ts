import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { expect, inject } from 'vitest';
import { HARNESS_TOOLS } from './go-tools.ts';
import './provided.ts';

// A setup file runs before the test file is imported and has no timeout: a file that starts a
// Go-built tool waits here while `npm test` is still building it in the background (or builds it
// now, in a run of a few files), instead of timing out in its first hook. Every other file goes on
// at once. Which files need which tool: go-tools.ts, worked out by the global setup for every test
// file of the project (the files a run can pick from).
const testFile = expect.getState().testPath;
const names = (testFile && inject('toolsOfFiles')[testFile]) || [];
for (const tool of HARNESS_TOOLS.filter((t) => names.includes(t.name))) {
  if (await tool.ready()) continue;
  const t0 = Date.now();
  process.stderr.write(`[harness] ${testFile}: waiting for ${tool.name} to be built …\n`);
  // A failed build is reported by the test that starts the tool, with the build's error.
  await tool.ensure().then(
    () => process.stderr.write(`[harness] ${tool.name} ready after ${((Date.now() - t0) / 1000).toFixed(0)} s\n`),
    () => {},
  );
}

// The same for Temporal when its CLI is being built (global-setup.ts): the files that need it
// (temporal-files.ts) wait until the global setup writes that the dev server answers.
const temporalReadyFile = inject('temporalReadyFile');
if (testFile && temporalReadyFile && inject('temporalFiles').includes(testFile)) {
  const t0 = Date.now();
  let said = await readFile(temporalReadyFile, 'utf8').catch(() => null);
  if (said === null) process.stderr.write(`[harness] ${testFile}: waiting for Temporal (its CLI is being built) …\n`);
  while (said === null) {
    await delay(250);
    said = await readFile(temporalReadyFile, 'utf8').catch(() => null);
  }
  if (said !== 'ready') throw new Error(`the run's Temporal did not start, so this file cannot run: ${said}`);
  if (Date.now() - t0 > 1_000) process.stderr.write(`[harness] Temporal ready after ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
}
