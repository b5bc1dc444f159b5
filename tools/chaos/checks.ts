import { checkInvariants } from '../../credits/ledger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import type { Db } from '../../db/pool.ts';
import type { CallResult } from './client.ts';
import type { PlannedCall } from './plan.ts';

/** Credits a bespoke extraction and a vehicle report bill (workflows/types.ts). */
const BESPOKE_CREDITS = 5;
const VEHICLE_REPORT_CREDITS = 1;
const EXAMPLES = 5;

export interface BooksInput {
  db: Db;
  /** The account id of each planned user index. */
  accountIds: string[];
  calls: PlannedCall[];
  results: Array<CallResult | undefined>;
  workflowIdOf: (call: PlannedCall) => string;
}

export interface Books {
  lines: string[];
  failures: string[];
  figures: {
    granted: number;
    balances: number;
    reserved: number;
    charged: number;
    openReservations: number;
    reservations: number;
    settled: number;
    released: number;
    releasedBySweeper: number;
    /** Runs that persisted and then died: the sweeper charged what they stored. */
    settledBySweeper: number;
    billedEvents: number;
    chargedButAnswerLost: number;
  };
}

/**
 * A batch item's child run (workflows/batch.ts childWorkflowId: `<analyze|vehicle>:<account>:batch-<batch>-<index>-<attempt>`):
 * settled for what its analysis recorded, or the report's price; never an extraction.
 */
function batchItemCall(workflowId: string): Pick<PlannedCall, 'workflow' | 'extract'> | undefined {
  const m = /^(analyze|vehicle):[^:]+:batch-/.exec(workflowId);
  return m ? { workflow: m[1] as 'analyze' | 'vehicle', extract: false } : undefined;
}

function examples(items: string[]): string {
  return items.slice(0, EXAMPLES).join('; ') + (items.length > EXAMPLES ? `; … (${items.length} in all)` : '');
}

/**
 * The money checks, for the run's users only: every account balances, nothing is held, every
 * reservation was opened once and closed once, every settle charged what the analysis recorded,
 * no lens of a photo was billed twice outside refresh, and what clients were told they paid is
 * what the ledger charged.
 */
export async function checkBooks(input: BooksInput): Promise<Books> {
  const { db, accountIds } = input;
  const failures: string[] = [];
  const lines: string[] = [];

  // 1. granted = balances + reserved + charged, reserved = open reservations, ledger = accounts.
  const reports = (await Promise.all(accountIds.map((u) => checkInvariants(db, u)))).flat();
  const bad = reports.filter((r) => !r.ok).map((r) => `${r.userId}: ${r.problems.join(', ')}`);
  if (reports.length !== accountIds.length) failures.push(`checkInvariants covered ${reports.length} of ${accountIds.length} users`);
  if (bad.length) failures.push(`ledger invariants broken for ${bad.length} user(s): ${examples(bad)}`);

  const acct = await db.query<{ user_id: string; granted: number; balances: number; reserved: number; charged: number }>(
    `SELECT user_id, community_granted + purchased_granted AS granted, community_balance + purchased_balance AS balances, reserved, charged
       FROM credit_accounts WHERE user_id = ANY($1)`,
    [accountIds],
  );
  const sum = (k: 'granted' | 'balances' | 'reserved' | 'charged') => acct.rows.reduce((n, r) => n + Number(r[k]), 0);
  const held = acct.rows.filter((r) => Number(r.reserved) !== 0).map((r) => `${r.user_id} reserved ${r.reserved}`);
  if (held.length) failures.push(`reserved not back to 0 for ${held.length} user(s): ${examples(held)}`);
  const unbalanced = acct.rows.filter((r) => Number(r.granted) !== Number(r.balances) + Number(r.reserved) + Number(r.charged));
  if (unbalanced.length) failures.push(`granted != balances + reserved + charged for ${unbalanced.length} user(s)`);

  // 2. Every reservation: one reserve row, one closing row, closed.
  const res = await db.query<{
    id: string; workflow_id: string | null; status: string; amount: number; settled_amount: number | null; reason: string | null;
    reserves: number; closes: number; run_credits: number | null; report_credits: number | null;
  }>(
    `SELECT r.id, r.workflow_id, r.status, r.amount, r.settled_amount, r.reason,
            count(l.id) FILTER (WHERE l.kind = 'reserve')::int AS reserves,
            count(l.id) FILTER (WHERE l.kind IN ('settle', 'release'))::int AS closes,
            (SELECT credits FROM analysis_runs a WHERE a.workflow_id = r.workflow_id) AS run_credits,
            (SELECT credits FROM vehicle_reports v WHERE v.workflow_id = r.workflow_id) AS report_credits
       FROM reservations r LEFT JOIN credit_ledger l ON l.reservation_id = r.id
      WHERE r.user_id = ANY($1)
      GROUP BY r.id`,
    [accountIds],
  );
  const open = res.rows.filter((r) => r.status === 'open');
  if (open.length) failures.push(`${open.length} reservation(s) still open after their expiry and a sweep: ${examples(open.map((r) => r.id))}`);
  const badRows = res.rows.filter((r) => r.reserves !== 1 || r.closes !== 1).map((r) => `${r.id} reserve×${r.reserves} close×${r.closes}`);
  if (badRows.length) failures.push(`reservations not opened once and closed once: ${examples(badRows)}`);

  // 3. Each settle charged exactly what its analysis recorded (lens credits + extraction, or the report).
  const callByWorkflow = new Map<string, PlannedCall>();
  for (const c of input.calls) if (!callByWorkflow.has(input.workflowIdOf(c))) callByWorkflow.set(input.workflowIdOf(c), c);
  const settleMismatch: string[] = [];
  const freeAnalyses: string[] = [];
  const settledBy = new Map<string, { status: string; charged: number }>();
  for (const r of res.rows) {
    if (r.workflow_id) settledBy.set(r.workflow_id, { status: r.status, charged: Number(r.settled_amount ?? 0) });
    const call = r.workflow_id ? (callByWorkflow.get(r.workflow_id) ?? batchItemCall(r.workflow_id)) : undefined;
    if (!call) {
      settleMismatch.push(`${r.id}: no planned call for workflow ${r.workflow_id}`);
      continue;
    }
    if (r.status === 'settled') {
      // The sweeper settles a run that persisted and then died for what it stored (no extraction).
      const bySweeper = r.reason?.startsWith('expired') ?? false;
      const expected = bySweeper
        ? Number(r.run_credits ?? NaN) + Number(r.report_credits ?? 0)
        : call.workflow === 'vehicle' ? VEHICLE_REPORT_CREDITS : Number(r.run_credits ?? NaN) + (call.extract ? BESPOKE_CREDITS : 0);
      if (r.run_credits === null) settleMismatch.push(`${r.id}: settled ${r.settled_amount} but nothing was persisted`);
      else if (Number(r.settled_amount) !== expected) settleMismatch.push(`${r.id}: settled ${r.settled_amount}, analysis recorded ${expected}`);
    } else if (r.status === 'released' && Number(r.run_credits ?? 0) > 0) {
      freeAnalyses.push(`${r.id}: persisted ${r.run_credits} billable lens(es), reservation released (${r.reason})`);
    }
  }
  if (settleMismatch.length) failures.push(`settled amounts that differ from the recorded analysis: ${examples(settleMismatch)}`);
  if (freeAnalyses.length) failures.push(`analyses persisted but never charged: ${examples(freeAnalyses)}`);

  // 4. No lens of a photo billed twice, except by refresh.
  const refreshIds = [...new Set(input.calls.filter((c) => c.refresh).map(input.workflowIdOf))];
  const twice = await db.query<{ user_id: string; sha256: string; lens: string; n: number }>(
    `SELECT user_id, sha256, lens, count(*)::int AS n FROM lens_events
      WHERE user_id = ANY($1) AND credits > 0 AND NOT (workflow_id = ANY($2))
      GROUP BY 1, 2, 3 HAVING count(*) > 1`,
    [accountIds, refreshIds],
  );
  if (twice.rows.length) {
    failures.push(`lenses billed twice without refresh: ${examples(twice.rows.map((r) => `${r.user_id} ${r.sha256.slice(0, 12)} ${r.lens} ×${r.n}`))}`);
  }
  const events = await db.query<{ n: number; credits: number }>(
    'SELECT count(*)::int AS n, coalesce(sum(credits), 0)::int AS credits FROM lens_events WHERE user_id = ANY($1) AND credits > 0',
    [accountIds],
  );

  // 5. What clients were told they paid is what the ledger charged for that workflow.
  const toldWrong: string[] = [];
  const chargedOnFailure: string[] = [];
  const lost: string[] = [];
  input.results.forEach((r) => {
    if (!r) return;
    const wf = input.workflowIdOf(r.call);
    const ledger = settledBy.get(wf);
    const ledgerCharge = ledger?.status === 'settled' ? ledger.charged : 0;
    const f = r.final;
    if (f.kind === 'answer' && f.status === 200 && 'creditsCharged' in f) {
      if (f.creditsCharged !== ledgerCharge) {
        toldWrong.push(`#${r.call.index} ${r.call.kind}: told ${f.creditsCharged}, ledger ${ledger ? `${ledger.status} ${ledger.charged}` : 'no reservation'}`);
      }
    } else if (ledgerCharge > 0) {
      const lostAnswer = f.kind !== 'answer' || (f.status >= 500 && f.status !== 502);
      (lostAnswer ? lost : chargedOnFailure).push(`#${r.call.index} ${r.call.kind} ${f.kind === 'answer' ? f.status : f.kind}: charged ${ledgerCharge}`);
    }
  });
  if (toldWrong.length) failures.push(`200 answers whose creditsCharged differs from the ledger: ${examples(toldWrong)}`);
  if (chargedOnFailure.length) failures.push(`charged although the answer was a definite failure (4xx/502): ${examples(chargedOnFailure)}`);

  const swept = await db.query<{ released: number; settled: number }>(
    `SELECT count(*) FILTER (WHERE kind = 'release')::int AS released, count(*) FILTER (WHERE kind = 'settle')::int AS settled
       FROM credit_ledger WHERE user_id = ANY($1) AND kind IN ('release', 'settle') AND note LIKE 'expired%'`,
    [accountIds],
  );
  const figures = {
    granted: sum('granted'),
    balances: sum('balances'),
    reserved: sum('reserved'),
    charged: sum('charged'),
    openReservations: open.length,
    reservations: res.rows.length,
    settled: res.rows.filter((r) => r.status === 'settled').length,
    released: res.rows.filter((r) => r.status === 'released').length,
    releasedBySweeper: swept.rows[0]!.released,
    settledBySweeper: swept.rows[0]!.settled,
    billedEvents: events.rows[0]!.n,
    chargedButAnswerLost: lost.length,
  };
  lines.push(
    `books (${accountIds.length} users): granted ${figures.granted} = balances ${figures.balances} + reserved ${figures.reserved} + charged ${figures.charged}` +
      ` → ${figures.granted === figures.balances + figures.reserved + figures.charged ? 'balanced' : 'UNBALANCED'}; checkInvariants ok for ${reports.length - bad.length}/${accountIds.length}`,
    `reservations: ${figures.reservations} (settled ${figures.settled}, released ${figures.released}; by the sweeper: released ${figures.releasedBySweeper}, ` +
      `settled for what the run persisted ${figures.settledBySweeper}), open ${figures.openReservations}; ` +
      `each opened once and closed once: ${badRows.length === 0 ? 'yes' : `NO (${badRows.length})`}`,
    `billing: ${figures.billedEvents} billed lens events (${events.rows[0]!.credits} credits); billed twice without refresh: ${twice.rows.length}; ` +
      `settles that differ from the recorded analysis: ${settleMismatch.length}; persisted but not charged: ${freeAnalyses.length}`,
    `client view: 200s whose creditsCharged differs from the ledger: ${toldWrong.length}; charged on a 4xx/502: ${chargedOnFailure.length}; ` +
      `charged but answered 5xx or not at all (a run that hit its execution timeout after persisting: billed once, the records are the caller's): ` +
      `${lost.length}${lost.length ? ` (${examples(lost)})` : ''}`,
  );
  return { lines, failures, figures };
}

/**
 * Every photo in the run's registries still has its bytes in the blob store: no failed or
 * retried request, and no collector pass, deleted a blob a registry entry needs.
 */
export async function checkBlobs(input: { db: Db; accountIds: string[]; blobDir: string }): Promise<{ lines: string[]; failures: string[]; missing: number }> {
  const store = new FsBlobStore(input.blobDir);
  const photos = await input.db.query<{ sha256: string; user_id: string }>('SELECT DISTINCT sha256, user_id FROM photos WHERE user_id = ANY($1)', [input.accountIds]);
  const shas = [...new Set(photos.rows.map((r) => r.sha256))];
  const missing: string[] = [];
  for (const sha of shas) if (!(await store.has(sha))) missing.push(sha);
  const failures = missing.length
    ? [`${missing.length} blob(s) the registry needs are missing from the store: ${examples(missing.map((m) => m.slice(0, 16)))}`]
    : [];
  return {
    lines: [`blobs: ${photos.rows.length} registry photos (${shas.length} distinct), blob missing for ${missing.length}`],
    failures,
    missing: missing.length,
  };
}
