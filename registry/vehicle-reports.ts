import { createHash, randomBytes } from 'node:crypto';
import type { Db, DbClient } from '../db/pool.ts';

export interface VehicleReport {
  id: string;
  output: Record<string, unknown>;
  /** The photos in the order the report was written for (its photo indexes point into this). */
  sha256s: string[];
  version: string;
  provider: string;
  vendor: string;
  model: string;
  producedAt: string;
}

/**
 * What makes two report requests the same: the set of photos (order and repeats do not matter),
 * the vehicle context the caller gave, and the report's lens version.
 */
export function vehicleSetHash(args: { sha256s: string[]; vehicle?: Record<string, unknown>; version: string }): string {
  const vehicle = args.vehicle ? Object.fromEntries(Object.keys(args.vehicle).sort().map((k) => [k, args.vehicle![k]])) : null;
  const key = JSON.stringify({ photos: [...new Set(args.sha256s)].sort(), vehicle, version: args.version });
  return createHash('sha256').update(key).digest('hex');
}

export async function findVehicleReport(db: Db, accountId: string, setHash: string): Promise<VehicleReport | null> {
  const r = await db.query<{ id: string; output: Record<string, unknown>; photo_sha256s: string[]; version: string; provider: string; vendor: string; model: string; produced_at: Date }>(
    `SELECT id, output, photo_sha256s, version, provider, vendor, model, produced_at FROM vehicle_reports
      WHERE user_id = $1 AND set_hash = $2 ORDER BY produced_at DESC LIMIT 1`,
    [accountId, setHash],
  );
  const row = r.rows[0];
  return row ? { id: row.id, output: row.output, sha256s: row.photo_sha256s, version: row.version, provider: row.provider, vendor: row.vendor, model: row.model, producedAt: row.produced_at.toISOString() } : null;
}

/** A report as the saga stores it. */
export interface VehicleReportRecord {
  workflowId: string;
  accountId: string;
  setHash: string;
  sha256s: string[];
  output: Record<string, unknown>;
  version: string;
  provider: string;
  vendor: string;
  model: string;
  credits: number;
}

/** Store a report once per workflow (Temporal may run the step again), in the caller's transaction. */
export async function saveVehicleReportIn(c: DbClient, args: VehicleReportRecord): Promise<string> {
  const r = await c.query<{ id: string }>(
    `INSERT INTO vehicle_reports (id, user_id, set_hash, workflow_id, photo_sha256s, output, version, provider, vendor, model, credits)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (workflow_id) DO UPDATE SET workflow_id = EXCLUDED.workflow_id
     RETURNING id`,
    [`vrp_${randomBytes(12).toString('hex')}`, args.accountId, args.setHash, args.workflowId, args.sha256s, args.output, args.version, args.provider, args.vendor, args.model, args.credits],
  );
  return r.rows[0]!.id;
}

/** Latest stored output of one lens (or step) for each photo that has it, in the caller's transaction. */
export async function lensOutputsIn(
  c: DbClient,
  args: { accountId: string; sha256s: string[]; lens: string },
): Promise<Record<string, Record<string, unknown>>> {
  const r = await c.query<{ sha256: string; output: Record<string, unknown> }>(
    'SELECT sha256, output FROM lens_records WHERE user_id = $1 AND sha256 = ANY($2) AND lens = $3',
    [args.accountId, args.sha256s, args.lens],
  );
  return Object.fromEntries(r.rows.map((row) => [row.sha256, row.output]));
}
