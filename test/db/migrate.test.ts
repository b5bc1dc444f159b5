import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../../db/migrate.ts';
import { testConfig } from '../harness/env.ts';

describe('migrations', () => {
  it('run up from an empty database, and a second run is a no-op', async () => {
    const url = new URL(testConfig().DATABASE_URL);
    url.pathname = `/lenstack_mig_${randomBytes(4).toString('hex')}`;
    expect(await createDatabaseIfMissing(url.toString())).toBe(true);
    expect(await createDatabaseIfMissing(url.toString())).toBe(false);
    try {
      // Processes starting together migrate at once: each waits its turn (node-pg-migrate alone
      // refused all but one with "Another migration is already running").
      await Promise.all(Array.from({ length: 4 }, () => migrate(url.toString())));
      await migrate(url.toString());
      const c = new pg.Client({ connectionString: url.toString() });
      await c.connect();
      const tables = await c.query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`);
      const runs = await c.query('SELECT count(*)::int AS n FROM pgmigrations');
      await c.end();
      expect(tables.rows.map((r) => r.tablename)).toEqual([
        'analysis_requests', 'analysis_runs', 'api_keys', 'api_requests', 'batch_items', 'batches', 'bespoke_schemas', 'blob_leases', 'card_fingerprints', 'console_identities', 'console_sessions', 'console_users', 'console_verifications',
        'credit_accounts', 'credit_ledger', 'credit_purchases', 'email_verification_tokens', 'first_pack_bonus_claims', 'lens_events', 'lens_records', 'pgmigrations', 'photos',
        'recorded_payments', 'refused_uploads', 'reservations', 'signup_grant_claims', 'thumbnails', 'unbilled_vendor_calls', 'upload_waits', 'uploads', 'users', 'vehicle_reports', 'workspace_invitations', 'workspace_members',
      ]);
      expect(runs.rows[0].n).toBeGreaterThanOrEqual(1);
    } finally {
      await dropDatabase(url.toString());
    }
  });

  it('dropDatabase removes a scratch database even while a session is still connected to it', async () => {
    const url = new URL(testConfig().DATABASE_URL);
    url.pathname = `/lenstack_drop_${randomBytes(4).toString('hex')}`;
    await createDatabaseIfMissing(url.toString());
    const session = new pg.Client({ connectionString: url.toString() });
    session.on('error', () => {}); // the drop terminates it
    await session.connect();
    await dropDatabase(url.toString());
    await session.end().catch(() => {});
    const c = new pg.Client({ connectionString: testConfig().DATABASE_URL });
    await c.connect();
    const found = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [url.pathname.slice(1)]);
    await c.end();
    expect(found.rowCount).toBe(0);
  });
});
