import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import pg from 'pg';
import { createClient } from 'redis';
import { describe, expect, inject, test } from 'vitest';
import { SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.ts';
import { testConfig } from '../harness/env.ts';
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
