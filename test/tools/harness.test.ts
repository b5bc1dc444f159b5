import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import pg from 'pg';
import { createClient } from 'redis';
import { describe, expect, inject, test } from 'vitest';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';
import { testConfig } from '../harness/env.ts';
import { committedDurations, longestFirst } from '../harness/durations.ts';
import { temporalFilesOf } from '../harness/temporal-files.ts';
import { waitingLast } from '../harness/waiting-last.ts';

describe('test harness', () => {
  test('provides a database of its own, created for this run and migrated', async () => {
    const url = inject('databaseUrl');
    expect(new URL(url).pathname).toMatch(/^\/lenstack_test_\d+_[0-9a-f]{8}$/);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ tablename: string }>(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
      );
      const tables = rows.map((r) => r.tablename);
      expect(tables).toContain('pgmigrations');
      // Every migration file was applied.
      const files = (await readdir(new URL('../../db/migrations/', import.meta.url))).filter((f) => f.endsWith('.sql'));
      const applied = await client.query<{ name: string }>('SELECT name FROM pgmigrations ORDER BY run_on, id');
      expect(applied.rows.map((r) => r.name)).toEqual(files.map((f) => f.replace(/\.sql$/, '')).sort());
      expect(tables.length).toBeGreaterThan(1);
    } finally {
      await client.end();
    }
  });

  test('provides an answering Temporal with the Lenstack search attributes registered at their types', async () => {
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const namespace = inject('temporalNamespace');
      const described = await connection.workflowService.describeNamespace({ namespace });
      expect(described.namespaceInfo?.name).toBe(namespace);

      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
      const expected = Object.fromEntries(
        Object.values(SEARCH_ATTRIBUTES).map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)]),
      );
      expect(Object.keys(expected).sort()).toEqual([
        'LenstackBatchId',
        'LenstackImageCount',
        'LenstackRequestId',
        'LenstackStack',
        'LenstackUserId',
      ]);
      for (const [name, type] of Object.entries(expected)) expect(customAttributes[name], name).toBe(type);
    } finally {
      await connection.close();
    }
  });

  test('provides Redis and a key prefix owned by this run', async () => {
    const prefix = inject('redisPrefix');
    expect(prefix).toMatch(/^lenstack-test:\d+-[0-9a-f]{6}:$/);
    const client = createClient({ url: inject('redisUrl') });
    await client.connect();
    try {
      const key = `${prefix}harness-check:${randomBytes(4).toString('hex')}`;
      await client.set(key, 'ok', { expiration: { type: 'EX', value: 60 } });
      expect(await client.get(key)).toBe('ok');
    } finally {
      client.destroy();
    }
  });

  test('testConfig builds a full Config from the injected services, per-file queue and prefix inside the run', () => {
    const config = testConfig({ PORT: 0, VENDOR_ORDER: 'google,openai' });
    expect(config.NODE_ENV).toBe('test');
    expect(config.DATABASE_URL).toBe(inject('databaseUrl'));
    expect(config.REDIS_URL).toBe(inject('redisUrl'));
    expect(config.TEMPORAL_ADDRESS).toBe(inject('temporalAddress'));
    expect(config.TEMPORAL_NAMESPACE).toBe(inject('temporalNamespace'));
    // Each file's blob store is its own directory inside the run's.
    expect(config.BLOB_DIR.startsWith(`${inject('blobDir')}/`)).toBe(true);
    expect(config.BLOB_DIR).not.toBe(inject('blobDir'));
    expect(config.REDIS_PREFIX.startsWith(inject('redisPrefix'))).toBe(true);
    expect(config.REDIS_PREFIX).not.toBe(inject('redisPrefix'));
    expect(config.TEMPORAL_TASK_QUEUE.startsWith(`${inject('temporalTaskQueue')}-`)).toBe(true);
    // Overrides go through the same parsing as the real environment.
    expect(config.PORT).toBe(0);
    expect(config.VENDOR_ORDER).toEqual(['google', 'openai']);
    // Same file, same queue and prefix.
    expect(testConfig().TEMPORAL_TASK_QUEUE).toBe(config.TEMPORAL_TASK_QUEUE);
  });
});

describe('test harness: the Go-built tools (test/harness/go-tools.ts)', () => {
  const at = (file: string) => fileURLToPath(new URL(`../../${file}`, import.meta.url));

  test('knows which test files start which tool, from what they import', () => {
    const known = inject('toolsOfFiles');
    expect(known[at('test/images/s3-pipeline.test.ts')]).toEqual(['versitygw']);
    expect(known[at('test/payments/api-stripe-wire.test.ts')]).toEqual(['stripe-mock']);
    // Through test/web/console-stack.ts, which starts stripe-mock for the console.
    expect(known[at('test/web/console.test.ts')]).toEqual(['stripe-mock']);
    expect(known[at('test/tools/openapi-breaking.test.ts')]).toEqual(['oasdiff']);
    expect(known[at('test/clients/go.test.ts')]).toEqual(['oapi-codegen']);
    expect(known[at('test/operations/promtool.test.ts')]).toEqual(['promtool']);
    // Files that start none are not listed: they never wait for a build.
    expect(known[at('test/tools/harness.test.ts')]).toBeUndefined();
    expect(known[at('test/tools/build-lock.test.ts')]).toBeUndefined();
    expect(known[at('test/analysis/analyze.test.ts')]).toBeUndefined();
  });

  test('the files needing a tool not built yet run last, each part in the order vitest chose', async () => {
    const built = { name: 'built', ready: async () => true };
    const building = { name: 'building', ready: async () => false };
    const needs: Record<string, (typeof built)[]> = { a: [building], b: [], c: [built], d: [built, building], e: [] };
    expect(await waitingLast(['a', 'b', 'c', 'd', 'e'], (f) => needs[f]!)).toEqual(['b', 'c', 'e', 'a', 'd']);
    // Everything built: vitest's order as it is.
    expect(await waitingLast(['a', 'b', 'c', 'd', 'e'], (f) => needs[f]!.map(() => built))).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
});

describe('test harness: the longest files first (test/harness/durations.ts)', () => {
  test('failed first, then files with no estimate in vitest\'s order, then the longest; ties keep vitest\'s order', () => {
    const estimates: Record<string, { failed?: boolean; seconds?: number }> = {
      small: { seconds: 1 },
      new1: {},
      long: { seconds: 130 },
      failed: { failed: true, seconds: 2 },
      mid: { seconds: 20 },
      new2: {},
      mid2: { seconds: 20 },
    };
    const order = longestFirst(Object.keys(estimates), (f) => estimates[f]!);
    expect(order).toEqual(['failed', 'new1', 'new2', 'long', 'mid', 'mid2', 'small']);
  });

  test('the committed durations name only test files that exist, in seconds', async () => {
    const durations = await committedDurations();
    expect(durations.size).toBeGreaterThan(150);
    const files = new Set((await readdir(fileURLToPath(new URL('..', import.meta.url)), { recursive: true })).map((f) => `test/${f}`));
    for (const [file, seconds] of durations) {
      expect(files.has(file), `${file} is in test/harness/durations.json but not in test/: run \`npm run test:durations\``).toBe(true);
      expect(seconds).toBeGreaterThanOrEqual(0);
      expect(seconds).toBeLessThan(1_000);
    }
  });
});

describe('test harness: the files that need Temporal (test/harness/temporal-files.ts)', () => {
  const at = (file: string) => fileURLToPath(new URL(`../../${file}`, import.meta.url));

  test('knows them from what they reach: a connection, the CLI, or a process of ours that connects', () => {
    const needing = new Set(inject('temporalFiles'));
    // Through test/helpers/pipeline.ts (connectTemporal) and a worker.
    expect(needing.has(at('test/analysis/analyze.test.ts'))).toBe(true);
    // ensureTemporalCli: the CLI itself.
    expect(needing.has(at('test/tools/temporal-cli.test.ts'))).toBe(true);
    // Connection.connect in the file itself.
    expect(needing.has(at('test/tools/harness.test.ts'))).toBe(true);
    // The SDK's mock activity environment opens nothing.
    expect(needing.has(at('test/credits/billing-steps.test.ts'))).toBe(false);
    // Pure image and vendor code.
    expect(needing.has(at('test/images/probe.test.ts'))).toBe(false);
    expect(needing.has(at('test/vendors/resize.test.ts'))).toBe(false);
    expect(needing.size).toBeGreaterThan(50);
  });

  test('the rule on files made for it: imports followed, lazy clients and mock environments not counted', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lenstack-temporal-files-'));
    try {
      const files: Record<string, string> = {
        'connects.test.ts': "import { start } from './helper.ts';\nstart();\n",
        'helper.ts': "import { Connection } from '@temporalio/client';\nexport const start = () => Connection.connect({ address: 'x' });\n",
        'spawns.test.ts': "import { spawn } from 'node:child_process';\nspawn('npx', ['tsx', 'worker/main.ts']);\n",
        'lazy.test.ts': "import { Client, Connection } from '@temporalio/client';\nnew Client({ connection: Connection.lazy({ address: '127.0.0.1:1' }) });\n",
        'mock.test.ts': "import { MockActivityEnvironment } from '@temporalio/testing';\nnew MockActivityEnvironment();\n",
        'typeonly.test.ts': "import type { start } from './helper.ts';\nexport type S = typeof start;\n",
      };
      for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
      const tests = Object.keys(files).filter((f) => f.endsWith('.test.ts')).map((f) => join(dir, f));
      const needing = await temporalFilesOf(tests);
      expect([...needing].map((f) => f.slice(dir.length + 1)).sort()).toEqual(['connects.test.ts', 'spawns.test.ts']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
