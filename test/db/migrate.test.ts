import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createDatabaseIfMissing, migrate } from '../../db/migrate.ts';
import { testConfig } from '../harness/env.ts';

describe('migrations', () => {
  it('run up from an empty database, and a second run is a no-op', async () => {
    const url = new URL(testConfig().DATABASE_URL);
    url.pathname = `/lenstack_mig_${randomBytes(4).toString('hex')}`;
    expect(await createDatabaseIfMissing(url.toString())).toBe(true);
    expect(await createDatabaseIfMissing(url.toString())).toBe(false);
    try {
      await migrate(url.toString());
      await migrate(url.toString());
      const c = new pg.Client({ connectionString: url.toString() });
      await c.connect();
      const tables = await c.query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`);
      const runs = await c.query('SELECT count(*)::int AS n FROM pgmigrations');
      await c.end();
      expect(tables.rows.map((r) => r.tablename)).toEqual([
        'analysis_runs', 'api_keys', 'bespoke_schemas', 'credit_accounts', 'credit_ledger', 'credit_purchases', 'email_verification_tokens',
        'lens_events', 'lens_records', 'pgmigrations', 'photos', 'recorded_payments', 'reservations', 'users', 'vehicle_reports',
      ]);
      expect(runs.rows[0].n).toBeGreaterThanOrEqual(1);
    } finally {
      const admin = new URL(url);
      admin.pathname = '/postgres';
      const c = new pg.Client({ connectionString: admin.toString() });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(url.pathname.slice(1))} WITH (FORCE)`);
      await c.end();
    }
  });
});
