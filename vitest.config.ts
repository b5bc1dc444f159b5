import { defineConfig } from 'vitest/config';
import { ToolsLastSequencer } from './test/harness/sequencer.ts';

export default defineConfig({
  test: {
    environment: 'node',
    include: ['test/**/*.test.ts'],
    // Real Postgres, Redis and a Temporal dev server for the whole run: test/harness/provided.ts.
    globalSetup: ['test/harness/global-setup.ts'],
    // fresh-modules.ts: each file evaluates our modules afresh in a process that ran files before it
    // (isolate below). wait-for-tools.ts: a file that starts a Go-built tool waits (untimed) until
    // it is built.
    setupFiles: ['test/harness/fresh-modules.ts', 'test/harness/heic-decoder.ts', 'test/harness/wait-for-tools.ts'],
    // The files needing a tool still being built run last (test/harness/sequencer.ts).
    sequence: { sequencer: ToolsLastSequencer },
    pool: 'forks',
    // A worker process runs file after file, node_modules loaded once: 0.68× the CPU and 0.73× the
    // wall time of a process per file in one run on the same machine (docs/decisions.md, "Test run
    // time"). Our own modules are still evaluated afresh for every file (fresh-modules.ts).
    isolate: false,
    // Our machines and CI have 2 cores; the suite's files wait on Temporal, Postgres, browsers and
    // child processes a good part of the time, so a third file runs beside the two: 15 % less wall
    // time in one run on the same machine (docs/decisions.md, "Test run time").
    maxWorkers: 3,
    // Integration tests start workflows and workers against real services: give them room,
    // but fail a hung test instead of waiting for CI's limit.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    // expect.poll waits for a state to arrive; its 1 s default is shorter than a sign-in round trip
    // or a batch's last step takes on a loaded 2-core machine (CI failed on both). A poll that
    // succeeds returns at once, so a longer bound only slows a failure.
    expect: { poll: { timeout: 15_000 } },
  },
});
