import type { Client } from '@temporalio/client';
import type { KeyCache } from '../auth/cache.ts';
import { evictEverywhere, type EvictionBus } from '../auth/eviction-bus.ts';
import { release } from '../credits/ledger.ts';
import { inTransaction, type Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import { deleteUnreferencedBlobs } from '../registry/photos.ts';

export interface EraseDeps {
  db: Db;
  blobs: Pick<BlobStore, 'delete'>;
  keyCache: KeyCache;
  evictionBus?: EvictionBus;
  /** Running workflows of the workspace are terminated through it (absent: they end on their own, refused at their next billing step). */
  temporal: Client;
}

export interface ErasedWorkspace {
  workspaceId: string;
  photos: number;
  blobsDeleted: number;
  keysRevoked: number;
  batches: number;
  workflowsTerminated: number;
  reservationsReleased: number;
}

/** The placeholder that replaces an erased workspace's address (users.email is NOT NULL). */
export const erasedEmail = (workspaceId: string) => `erased+${workspaceId}@erased.invalid`;

/**
 * Erase a workspace (docs/privacy.md "Erasing a workspace"). In this order:
 * 1. Under the account lock every credit movement takes (credits/ledger.ts holdIn), the workspace
 *    is marked deleted and its keys, members and invitations are deleted: from this commit no run
 *    can reserve, record or charge for it (refuseDeletedIn), and no key of it authenticates.
 * 2. The keys are evicted from every API process (the Redis fan-out).
 * 3. Its running workflows (analyses, vehicle reports, batches) are terminated; open reservations
 *    are released, so nothing it held is charged.
 * 4. Its registry (photos, lens records, vehicle reports), stored answers, batches, uploads,
 *    bespoke schemas and day counters are deleted; the ledger's notes and the reservations' reasons
 *    are replaced by '[erased]' (amounts, kinds and dates stay: the ledger still balances); its
 *    address and name are replaced.
 * 5. Its blobs are deleted unless something else keeps them (another workspace, a run in flight).
 * Null when there is no such live workspace. Each step can be run again: a second call after a
 * crash midway finds the workspace deleted and finishes steps 3 to 5 (`resume`).
 */
export async function eraseWorkspace(deps: EraseDeps, workspaceId: string, opts: { resume?: boolean } = {}): Promise<ErasedWorkspace | null> {
  const marked = await inTransaction(deps.db, async (c) => {
    const acct = await c.query<{ deleted: boolean }>(
      'SELECT u.deleted_at IS NOT NULL AS deleted FROM users u JOIN credit_accounts a ON a.user_id = u.id WHERE u.id = $1 FOR UPDATE OF u, a',
      [workspaceId],
    );
    const row = acct.rows[0];
    if (!row || (row.deleted && !opts.resume)) return null;
    await c.query('UPDATE users SET deleted_at = coalesce(deleted_at, now()) WHERE id = $1', [workspaceId]);
    const keys = await c.query<{ key_hash: string }>('DELETE FROM api_keys WHERE user_id = $1 RETURNING key_hash', [workspaceId]);
    await c.query('DELETE FROM workspace_invitations WHERE workspace_id = $1', [workspaceId]);
    await c.query('DELETE FROM workspace_members WHERE workspace_id = $1', [workspaceId]);
    return { keyHashes: keys.rows.map((k) => k.key_hash) };
  });
  if (!marked) return null;

  for (const keyHash of marked.keyHashes) await evictEverywhere(deps.keyCache, deps.evictionBus, { keyHash });

  let workflowsTerminated = 0;
  const running = deps.temporal.workflow.list({ query: `LenstackUserId = "${workspaceId}" AND ExecutionStatus = "Running"` });
  for await (const wf of running) {
    try {
      await deps.temporal.workflow.getHandle(wf.workflowId, wf.runId).terminate('workspace erased');
      workflowsTerminated += 1;
    } catch {
      // Ended meanwhile: its billing steps refuse the deleted workspace anyway.
    }
  }
  const open = await deps.db.query<{ id: string }>(`SELECT id FROM reservations WHERE user_id = $1 AND status = 'open'`, [workspaceId]);
  let reservationsReleased = 0;
  for (const { id } of open.rows) if ((await release(deps.db, { id, reason: 'workspace erased' })).applied) reservationsReleased += 1;

  const erased = await inTransaction(deps.db, async (c) => {
    const photos = await c.query<{ sha256: string }>('DELETE FROM photos WHERE user_id = $1 RETURNING sha256', [workspaceId]);
    await c.query('DELETE FROM vehicle_reports WHERE user_id = $1', [workspaceId]);
    const pending = await c.query<{ sha256: string }>(
      `SELECT DISTINCT s AS sha256 FROM batch_items i JOIN batches b ON b.id = i.batch_id,
              LATERAL (SELECT i.ref->>'sha256' UNION SELECT jsonb_array_elements_text(jsonb_path_query_array(i.photos, '$[*].ref.sha256'))) AS x(s)
        WHERE b.user_id = $1 AND s IS NOT NULL`,
      [workspaceId],
    );
    const batches = await c.query('DELETE FROM batches WHERE user_id = $1', [workspaceId]);
    const uploads = await c.query<{ sha256: string | null }>('DELETE FROM uploads WHERE user_id = $1 RETURNING sha256', [workspaceId]);
    for (const table of ['analysis_requests', 'analysis_runs', 'api_requests', 'bespoke_schemas', 'email_verification_tokens', 'refused_uploads', 'unbilled_vendor_calls']) {
      await c.query(`DELETE FROM ${table} WHERE user_id = $1`, [workspaceId]);
    }
    await c.query(`UPDATE credit_ledger SET note = '[erased]' WHERE user_id = $1 AND note IS NOT NULL AND note <> '[erased]'`, [workspaceId]);
    await c.query(`UPDATE reservations SET reason = '[erased]', workflow_id = NULL WHERE user_id = $1`, [workspaceId]);
    await c.query('UPDATE users SET email = $2, name = NULL, stripe_customer_id = NULL, retention_days = NULL WHERE id = $1', [workspaceId, erasedEmail(workspaceId)]);
    const shas = [...new Set([...photos.rows.map((p) => p.sha256), ...pending.rows.map((p) => p.sha256), ...uploads.rows.flatMap((u) => (u.sha256 ? [u.sha256] : []))])];
    return { photos: photos.rowCount ?? 0, batches: batches.rowCount ?? 0, shas };
  });
  const gone = await deleteUnreferencedBlobs(deps.db, deps.blobs, erased.shas);
  return {
    workspaceId,
    photos: erased.photos,
    blobsDeleted: gone.length,
    keysRevoked: marked.keyHashes.length,
    batches: erased.batches,
    workflowsTerminated,
    reservationsReleased,
  };
}
