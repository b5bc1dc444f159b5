import { afterAll, vi } from 'vitest';
import { z } from 'zod';

// The suite runs with `isolate: false` (vitest.config.ts): a worker process runs file after file,
// so what comes from node_modules (the Temporal SDK, fastify, sharp, the vendor SDKs …) is loaded
// once per process instead of once per file (docs/decisions.md, "Test run time"). Our own modules
// are not shared: this first setup file drops them before each test file, so every file evaluates
// the product, and the harness modules that hold its ids (env.ts), afresh, as in a process of its
// own. What the product leaves in a shared package is reset here too: the schemas it names with
// `.meta({ id })` are kept in zod's process-wide registry, and the OpenAPI document is made from
// that registry, so the previous file's copies would stand beside this file's.
vi.resetModules();
z.globalRegistry.clear();

// What the product keeps for the life of a process, this file's copy of it ends with the file, as
// the process would have: the shared exiftool (its perl processes and its exit listeners).
const { closeSharedMetadataTool } = await import('../../enrich/exiftool.ts');
afterAll(() => closeSharedMetadataTool());
