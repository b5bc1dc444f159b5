import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { loadConfig, type Config, type configSchema } from '../../core/config.ts';
import type { z } from 'zod';
import './provided.ts';

type ConfigKey = keyof z.input<typeof configSchema>;
export type ConfigOverrides = Partial<Record<ConfigKey, string | number | boolean>>;

// Test files run in parallel, three processes each running file after file, and every file gets a
// fresh copy of this module (fresh-modules.ts). A Worker polls its whole task queue, so each file
// gets its own queue (and Redis prefix) inside the run's: one file's workers never pick up another
// file's workflows, whether that file runs beside it or ran before it in the same process.
const fileId = randomBytes(3).toString('hex');

/**
 * A full Config for this test file, built from the harness's services the same way production
 * parses its environment, so tests never read process.env. `overrides` take env-style values.
 */
export function testConfig(overrides: ConfigOverrides = {}): Config {
  const env: Record<string, string | undefined> = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: inject('databaseUrl'),
    REDIS_URL: inject('redisUrl'),
    REDIS_PREFIX: `${inject('redisPrefix')}${fileId}:`,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_NAMESPACE: inject('temporalNamespace'),
    TEMPORAL_TASK_QUEUE: `${inject('temporalTaskQueue')}-${fileId}`,
    // Each file its own blob store: a blob another file stored must not change what this one sees.
    BLOB_DIR: `${inject('blobDir')}/${fileId}`,
    // Tests buy packs without charging a card: the recording gateway, chosen explicitly.
    PAYMENTS_GATEWAY: 'recording',
    HEIC_DECODER: inject('heicDecoder'),
  };
  for (const [key, value] of Object.entries(overrides)) env[key] = value === undefined ? undefined : String(value);
  return loadConfig(env);
}
