import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestLogFor } from '../../api/plugins/request-log.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { RequestLog, type RequestRecord } from '../../requestlog/buffer.ts';
import { collectBlobs } from '../../worker/blob-collector.ts';
import { bearer, buildTestApp, createTestAccount, type TestApp, type TestAccount } from '../helpers/app.ts';

/**
 * The API's request log (requestlog/buffer.ts, docs/decisions.md "The console's Requests log"):
 * one multi-row INSERT per flush, bounded, never in the request's way, dropped and counted when
 * Postgres is away; the collector sweeps rows past 30 days. Against the run's Postgres.
 */
let t: TestApp;
let user: TestAccount;
let keyId: string;
beforeAll(async () => {
  t = await buildTestApp();
  user = await createTestAccount(t.db, { community: 10 });
  keyId = (await t.db.query<{ id: string }>(`SELECT id FROM api_keys WHERE user_id = $1 AND kind = 'live'`, [user.userId])).rows[0]!.id;
});
afterAll(async () => t?.close());

const row = (i: number, at = new Date()): RequestRecord => ({
  userId: user.userId,
  at,
  keyId,
  operation: 'getCatalog',
  method: 'GET',
  status: i % 2 ? 200 : 422,
  errorCode: i % 2 ? null : 'IMAGE_INVALID',
  credits: null,
  latencyMs: i,
  requestId: `req_unit_${i}_${Date.now()}`,
  analysisId: null,
  error: i % 2 ? null : JSON.stringify({ error: { code: 'IMAGE_INVALID', message: 'x', retryable: false, requestId: `r${i}` } }),
});
const countRows = async (prefix: string) => (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM api_requests WHERE request_id LIKE $1`, [`${prefix}%`])).rows[0]!.n;

describe('the request log buffer', () => {
  it('writes 300 waiting rows as one INSERT statement', async () => {
    let statements = 0;
    const counting = { query: (...args: Parameters<Db['query']>) => (statements++, t.db.query(...args)) } as unknown as Db;
    const log = new RequestLog(counting, { batchSize: 1000, intervalMs: 3_600_000 });
    const rows = Array.from({ length: 300 }, (_, i) => ({ ...row(i), requestId: `req_multi_${i}` }));
    for (const r of rows) log.record(r);
    expect(log.pending).toBe(300);
    await log.flush();
    expect(statements).toBe(1);
    expect(log.pending).toBe(0);
    expect(await countRows('req_multi_')).toBe(300);
    const envelope = await t.db.query<{ error: { error: { code: string } } | null; error_code: string | null }>(`SELECT error, error_code FROM api_requests WHERE request_id = 'req_multi_0'`);
    expect(envelope.rows[0]).toEqual({ error: { error: { code: 'IMAGE_INVALID', message: 'x', retryable: false, requestId: 'r0' } }, error_code: 'IMAGE_INVALID' });
    await log.close();
  });

  it('holds at most its capacity: what comes beyond is dropped and counted, not queued', async () => {
    const drops: Array<[string, number]> = [];
    const log = new RequestLog(t.db, { capacity: 2, batchSize: 100, intervalMs: 3_600_000, onDrop: (reason, n) => drops.push([reason, n]) });
    for (let i = 0; i < 5; i++) log.record({ ...row(i), requestId: `req_cap_${i}` });
    expect(log.pending).toBe(2);
    expect(drops).toEqual([['full', 1], ['full', 1], ['full', 1]]);
    await log.close();
    expect(await countRows('req_cap_')).toBe(2);
  });

  it('with Postgres away the API answers as usual and the rows are dropped with a metric', async () => {
    // A pool to a port nothing listens on: every query fails to connect, as with Postgres down.
    const away = createPool('postgres://postgres@127.0.0.1:1/lenstack', { max: 1 });
    const metrics = createApiMetrics();
    const warned: number[] = [];
    const log = requestLogFor(away, metrics, (_err, rows) => warned.push(rows));
    const app = await buildTestApp({ deps: { requestLog: log } });
    try {
      for (let i = 0; i < 3; i++) expect((await app.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(user.liveKey) })).statusCode).toBe(200);
      expect(log.pending).toBe(3);
      await log.flush();
      expect(log.pending).toBe(0);
      expect(warned).toEqual([3]);
      const text = await metrics.registry.getSingleMetricAsString('lenstack_request_log_rows_total');
      expect(text).toContain('lenstack_request_log_rows_total{outcome="dropped_db"} 3');
    } finally {
      await app.close();
      await away.end();
    }
  });

  it('records what the API answered: operation, status, code, envelope, key; nothing for a request without a workspace key', async () => {
    const bad = await t.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.liveKey), payload: { modules: ['nope'], imageUrl: 'https://example.com/a.jpg' } });
    expect(bad.statusCode).toBe(400);
    const unknownKey = await t.app.inject({ method: 'GET', url: '/v1/modules', headers: bearer('svc_live_' + 'y'.repeat(40)) });
    expect(unknownKey.statusCode).toBe(401);
    const health = await t.app.inject({ method: 'GET', url: '/v1/health' });
    expect(health.statusCode).toBe(200);
    await t.app.requestLog.flush();
    // The run's other files write to the same table at the same time: only these three requests'
    // rows count, found by their request ids.
    const ids = [bad, unknownKey, health].map((r) => String(r.headers['x-request-id']));
    expect(new Set(ids).size).toBe(3);
    const rows = await t.db.query<{ user_id: string; key_id: string; operation: string; method: string; status: number; error_code: string; request_id: string; error: unknown }>(
      'SELECT user_id, key_id, operation, method, status, error_code, request_id, error FROM api_requests WHERE request_id = ANY($1::text[])',
      [ids],
    );
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]).toEqual({ user_id: user.userId, key_id: keyId, operation: 'analyzeV1', method: 'POST', status: 400, error_code: 'VALIDATION_FAILED', request_id: bad.json().error.requestId, error: bad.json() });
  });

  it('the blob collector sweeps rows older than 30 days and keeps the rest', async () => {
    const log = new RequestLog(t.db, { intervalMs: 3_600_000 });
    const day = 86_400_000;
    log.record({ ...row(1, new Date(Date.now() - 31 * day)), requestId: 'req_sweep_old' });
    log.record({ ...row(1, new Date(Date.now() - 29 * day)), requestId: 'req_sweep_kept' });
    await log.close();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-sweep-'));
    try {
      await collectBlobs(t.db, new FsBlobStore(dir), { graceMs: 3_600_000 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await countRows('req_sweep_old')).toBe(0);
    expect(await countRows('req_sweep_kept')).toBe(1);
  });
});
