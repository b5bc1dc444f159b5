import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

describe('WORKFLOW_TIMEOUT_MS and RESERVATION_TTL_MS', () => {
  it('default to 10 and 15 minutes (docs/decisions.md "Reservation lifetime")', () => {
    const config = loadConfig({});
    expect(config.WORKFLOW_TIMEOUT_MS).toBe(600_000);
    expect(config.RESERVATION_TTL_MS).toBe(900_000);
  });

  it('refuse a reservation that could expire while its workflow still runs', () => {
    expect(() => loadConfig({ WORKFLOW_TIMEOUT_MS: '60000', RESERVATION_TTL_MS: '60000' })).toThrow(ConfigError);
    expect(loadConfig({ WORKFLOW_TIMEOUT_MS: '60000', RESERVATION_TTL_MS: '60001' }).RESERVATION_TTL_MS).toBe(60_001);
  });
});

describe('the analyze and vehicle workflows use them', () => {
  let p: Pipeline;
  beforeAll(async () => {
    p = await startPipeline({ config: { WORKFLOW_TIMEOUT_MS: 40_000, RESERVATION_TTL_MS: 55_000 } });
  }, 120_000);
  afterAll(async () => {
    await p?.close();
  });

  it.each([
    ['analyze', { modules: ['dating'] }],
    ['vehicle', { preset: 'vehicle-condition' }],
  ])('%s: execution timeout and reservation expiry', async (kind, body) => {
    const user = await createTestAccount(p.db, { community: 10 });
    const requestId = `req-timeouts-${kind}`;
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/analyze',
      headers: { ...bearer(user.liveKey), 'x-request-id': requestId },
      payload: { images: [{ base64: photoBase64('gps-DSCN0021.jpg') }], ...body },
    });
    expect(res.statusCode, res.body).toBe(200);
    const workflowId = `${kind}:${user.userId}:${requestId}`;
    const described = await p.temporal.workflow.getHandle(workflowId).describe();
    expect(described.raw.executionConfig?.workflowExecutionTimeout?.seconds?.toString()).toBe('40');
    const r = await p.db.query<{ ttl_ms: number }>(
      `SELECT round(extract(epoch FROM expires_at - created_at) * 1000)::int AS ttl_ms FROM reservations WHERE workflow_id = $1`,
      [workflowId],
    );
    expect(r.rows).toHaveLength(1);
    // created_at is the transaction's start, expires_at now() + ttl in the same transaction.
    expect(r.rows[0]!.ttl_ms).toBe(55_000);
  });
});
