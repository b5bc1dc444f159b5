import { planLimitExceeded, AppError } from '../core/errors.ts';
import { inTransaction, type Db, type DbClient } from '../db/pool.ts';

/**
 * The credit ledger (docs/architecture.md, docs/decisions.md "Billing and credits"). Every movement is one append-only ledger row with an
 * idempotency key, written in the same transaction as the account row it changes; the account
 * row's CHECK keeps granted + purchased = balances + reserved + charged at every commit.
 */
export type Pool = 'community' | 'purchased';

export interface Balance {
  community: number;
  purchased: number;
  reserved: number;
  referralBonus: number;
}

export interface Reservation {
  id: string;
  userId: string;
  amount: number;
  fromCommunity: number;
  fromPurchased: number;
  status: 'open' | 'settled' | 'released';
  settledAmount: number | null;
  expiresAt: Date;
}

interface AccountRow {
  community_balance: number;
  purchased_balance: number;
  reserved: number;
  referral_bonus: number;
}

async function lockAccount(c: DbClient, accountId: string): Promise<AccountRow> {
  const r = await c.query<AccountRow>(
    'SELECT community_balance, purchased_balance, reserved, referral_bonus FROM credit_accounts WHERE user_id = $1 FOR UPDATE',
    [accountId],
  );
  const row = r.rows[0];
  if (!row) throw new AppError('AUTH_FAILED', 'No credit account for this user');
  return row;
}

export async function getBalance(db: Db, accountId: string): Promise<Balance> {
  const r = await db.query<AccountRow>(
    'SELECT community_balance, purchased_balance, reserved, referral_bonus FROM credit_accounts WHERE user_id = $1',
    [accountId],
  );
  const row = r.rows[0];
  if (!row) return { community: 0, purchased: 0, reserved: 0, referralBonus: 0 };
  return {
    community: row.community_balance,
    purchased: row.purchased_balance,
    reserved: row.reserved,
    referralBonus: row.referral_bonus,
  };
}

export interface GrantArgs {
  accountId: string;
  pool: Pool;
  amount: number;
  idempotencyKey: string;
  note?: string;
  kind?: 'grant' | 'purchase';
  referral?: boolean;
}

/** Add credits to a pool. Returns false when this idempotency key was already applied. */
export async function grant(db: Db, args: GrantArgs): Promise<boolean> {
  return inTransaction(db, (c) => grantIn(c, args));
}

/**
 * `grant` inside a caller's transaction, so a grant can commit together with the fact that
 * earns it (a verified e-mail, a paid purchase). Takes the account-row lock.
 */
export async function grantIn(c: DbClient, args: GrantArgs): Promise<boolean> {
  if (!Number.isSafeInteger(args.amount) || args.amount <= 0) throw new Error('grant amount must be a positive integer');
  await lockAccount(c, args.accountId);
  const ins = await c.query(
    `INSERT INTO credit_ledger (user_id, kind, idempotency_key, community_delta, purchased_delta, note)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (user_id, idempotency_key) DO NOTHING`,
    [
      args.accountId,
      args.kind ?? 'grant',
      args.idempotencyKey,
      args.pool === 'community' ? args.amount : 0,
      args.pool === 'purchased' ? args.amount : 0,
      args.note ?? null,
    ],
  );
  if (!ins.rowCount) return false;
  if (args.pool === 'community') {
    await c.query(
      `UPDATE credit_accounts SET community_balance = community_balance + $2, community_granted = community_granted + $2,
         referral_bonus = referral_bonus + $3, updated_at = now() WHERE user_id = $1`,
      [args.accountId, args.amount, args.referral ? args.amount : 0],
    );
  } else {
    await c.query(
      `UPDATE credit_accounts SET purchased_balance = purchased_balance + $2, purchased_granted = purchased_granted + $2,
         packs_purchased = packs_purchased + $3, updated_at = now() WHERE user_id = $1`,
      [args.accountId, args.amount, args.kind === 'purchase' ? 1 : 0],
    );
  }
  return true;
}

function rowToReservation(r: {
  id: string; user_id: string; amount: number; from_community: number; from_purchased: number;
  status: Reservation['status']; settled_amount: number | null; expires_at: Date;
}): Reservation {
  return {
    id: r.id,
    userId: r.user_id,
    amount: r.amount,
    fromCommunity: r.from_community,
    fromPurchased: r.from_purchased,
    status: r.status,
    settledAmount: r.settled_amount,
    expiresAt: r.expires_at,
  };
}

async function findReservation(c: DbClient | Db, id: string, lock = false): Promise<Reservation | null> {
  const r = await c.query(
    `SELECT id, user_id, amount, from_community, from_purchased, status, settled_amount, expires_at
       FROM reservations WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`,
    [id],
  );
  return r.rows[0] ? rowToReservation(r.rows[0]) : null;
}

/**
 * Hold `amount` credits for one in-flight call, community pool first. Idempotent by id: a retry
 * returns the existing reservation. Short of credits → 402 PLAN_LIMIT_EXCEEDED with the shortfall.
 */
export interface ReserveArgs {
  id: string;
  accountId: string;
  amount: number;
  ttlMs: number;
  workflowId?: string;
  reason?: string;
}

export async function reserve(db: Db, args: ReserveArgs): Promise<Reservation> {
  return inTransaction(db, (c) => reserveIn(c, args));
}

/**
 * An open reservation's TTL counted again from now (never shortened): a hold taken before a wait
 * (a vehicle awaiting its uploads, activities/batch.ts) must still outlast the run it pays for.
 * A closed one is left as it is. Whether it was open.
 */
export async function renewHold(db: Db, args: { id: string; ttlMs: number }): Promise<boolean> {
  const r = await db.query(
    `UPDATE reservations SET expires_at = greatest(expires_at, now() + ($2 || ' milliseconds')::interval) WHERE id = $1 AND status = 'open'`,
    [args.id, String(args.ttlMs)],
  );
  return Boolean(r.rowCount);
}

/** `reserve` inside a caller's transaction. Takes the account-row lock. */
export async function reserveIn(c: DbClient, args: ReserveArgs): Promise<Reservation> {
  if (!Number.isSafeInteger(args.amount) || args.amount <= 0) throw new Error('reserve amount must be a positive integer');
  const { id, accountId, ...reserve } = args;
  return (await holdIn(c, { accountId, reservationId: id, gate: null, reserve }))!;
}

/**
 * The gate for vendor work nobody pays for. A request that sends anything to a vendor is refused
 * (429) once the account's unbilled calls today reached `cap`; one that bills nothing (`freeCalls`
 * > 0: only free lenses run) also needs 1 available credit (not charged; 402 otherwise), and its
 * calls count at once.
 */
export interface UnbilledGate {
  cap: number;
  /** The request sends anything to a vendor. */
  vendorWork: boolean;
  /** Vendor calls it makes that bill nothing (only free lenses run). */
  freeCalls: number;
}

/**
 * The gate for vendor work nobody pays for (`gate`, see UnbilledGate) and the reservation
 * (`reserve`, see reserve) in one round trip for the account: the account-row lock reads the
 * balances, the unbilled calls of today and the reservation `reservationId` when a retry already
 * made it. `closed` is thrown when that reservation is closed: its run has ended. Returns the
 * reservation, or null when none was asked for.
 */
export async function holdIn(
  c: DbClient,
  args: {
    accountId: string;
    reservationId: string;
    gate: UnbilledGate | null;
    reserve: Omit<ReserveArgs, 'accountId' | 'id'> | null;
    closed?: () => Error;
  },
): Promise<Reservation | null> {
  const { accountId, gate, reserve } = args;
  if (reserve && (!Number.isSafeInteger(reserve.amount) || reserve.amount <= 0)) throw new Error('reserve amount must be a positive integer');
  if (!reserve && !gate?.vendorWork && !args.closed) return null;
  const found = await c.query<AccountRow & { existing: Parameters<typeof rowToReservation>[0] | null; calls: number | null; deleted: boolean }>(
    `SELECT a.community_balance, a.purchased_balance, a.reserved, a.referral_bonus,
            (SELECT deleted_at IS NOT NULL FROM users WHERE id = $1) AS deleted,
            (SELECT to_jsonb(r) FROM (SELECT id, user_id, amount, from_community, from_purchased, status, settled_amount, expires_at
                                        FROM reservations WHERE id = $2) r) AS existing,
            (SELECT calls FROM unbilled_vendor_calls WHERE user_id = $1 AND day = (now() AT TIME ZONE 'utc')::date) AS calls
       FROM credit_accounts a WHERE a.user_id = $1 FOR UPDATE OF a`,
    [accountId, args.reservationId],
  );
  const acct = found.rows[0];
  if (!acct) throw new AppError('AUTH_FAILED', 'No credit account for this user');
  // Erasure marks the workspace deleted under this same lock (accounts/erase.ts): nothing is held after it.
  if (acct.deleted) throw workspaceDeleted();
  if (args.closed && acct.existing && acct.existing.status !== 'open') throw args.closed();
  if (gate?.vendorWork) {
    if ((acct.calls ?? 0) >= gate.cap) throw unbilledCapReached(gate.cap);
    if (gate.freeCalls > 0) {
      const total = acct.community_balance + acct.purchased_balance;
      if (total < 1) throw planLimitExceeded({ needed: 1, community: acct.community_balance, purchased: acct.purchased_balance, total, resetsInDays: 0 });
      await countUnbilledCallsIn(c, { accountId, calls: gate.freeCalls });
    }
  }
  if (!reserve) return null;
  const own = { ...reserve, id: args.reservationId, accountId };
  if (acct.existing) return ownReservation(rowToReservation({ ...acct.existing, expires_at: new Date(acct.existing.expires_at) }), own);
  const total = acct.community_balance + acct.purchased_balance;
  if (total < reserve.amount) {
    throw planLimitExceeded({
      needed: reserve.amount,
      community: acct.community_balance,
      purchased: acct.purchased_balance,
      total,
      resetsInDays: 0,
    });
  }
  const fromCommunity = Math.min(acct.community_balance, reserve.amount);
  const fromPurchased = reserve.amount - fromCommunity;
  // The reservation, its ledger row and the account change in one statement. The lock statement
  // above read `existing` with its own snapshot, taken before it waited for the account lock: a
  // retry of this id that committed meanwhile is invisible to it, so the insert may still meet the
  // row. Then nothing is inserted or moved (the ledger row and the account change depend on the
  // insert), and the retry's reservation is the answer.
  const ins = await c.query(
    `WITH res AS (
       INSERT INTO reservations (id, user_id, amount, from_community, from_purchased, workflow_id, reason, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, now() + ($8 || ' milliseconds')::interval)
       ON CONFLICT (id) DO NOTHING
       RETURNING id, user_id, amount, from_community, from_purchased, status, settled_amount, expires_at
     ), led AS (
       INSERT INTO credit_ledger (user_id, kind, idempotency_key, reservation_id, community_delta, purchased_delta, reserved_delta)
       SELECT $2, 'reserve', 'reserve:' || $1, $1, -$4::bigint, -$5::bigint, $3 FROM res
     ), acct AS (
       UPDATE credit_accounts SET community_balance = community_balance - $4, purchased_balance = purchased_balance - $5,
         reserved = reserved + $3, updated_at = now() WHERE user_id = $2 AND EXISTS (SELECT 1 FROM res)
     )
     SELECT * FROM res`,
    [own.id, own.accountId, own.amount, fromCommunity, fromPurchased, own.workflowId ?? null, own.reason ?? null, String(own.ttlMs)],
  );
  if (ins.rows[0]) return rowToReservation(ins.rows[0]);
  const raced = await findReservation(c, own.id);
  if (!raced) throw new Error(`reservation ${own.id} conflicted but cannot be read`);
  return ownReservation(raced, own);
}

function ownReservation(r: Reservation, args: ReserveArgs): Reservation {
  if (r.userId !== args.accountId) throw new Error(`reservation ${args.id} belongs to another user`);
  return r;
}

type CloseOutcome = { kind: 'settle'; charge: number; reason?: string } | { kind: 'release'; reason: string };
type Closed = { applied: boolean; reservation: Reservation | null };

/**
 * Close a reservation, charging `charge` (≤ amount) and returning the rest to the pools it came
 * from (purchased first, so the community pool keeps being spent first). Exactly once: closing
 * a closed reservation is a no-op that reports what happened the first time.
 */
async function close(db: Db, id: string, outcome: CloseOutcome): Promise<Closed> {
  return inTransaction(db, (c) => closeIn(c, id, outcome));
}

async function closeIn(c: DbClient, id: string, outcome: CloseOutcome, lockedAccount?: string): Promise<Closed> {
  // Account lock first, same order as reserve (no deadlock), then the reservation row. A caller
  // whose transaction holds the account's lock already (refuseDeletedIn) names it: no second lock.
  if (lockedAccount === undefined) {
    const locked = await c.query<{ user_id: string }>(
      'SELECT user_id FROM credit_accounts WHERE user_id = (SELECT user_id FROM reservations WHERE id = $1) FOR UPDATE',
      [id],
    );
    if (!locked.rows[0]) return { applied: false, reservation: null };
  }
  const res = await findReservation(c, id, true);
  if (res && lockedAccount !== undefined && res.userId !== lockedAccount) {
    throw new Error(`reservation ${id} belongs to another account than the one this transaction locked`);
  }
  if (!res || res.status !== 'open') return { applied: false, reservation: res };
  const charge = outcome.kind === 'settle' ? outcome.charge : 0;
  if (!Number.isSafeInteger(charge) || charge < 0 || charge > res.amount) {
    throw new Error(`settle charge ${charge} outside 0..${res.amount} for reservation ${id}`);
  }
  const refund = res.amount - charge;
  const backToPurchased = Math.min(refund, res.fromPurchased);
  const backToCommunity = refund - backToPurchased;
  const status = outcome.kind === 'settle' ? 'settled' : 'released';
  const settledAmount = outcome.kind === 'settle' ? charge : null;
  // The reservation's close, its ledger row and the account change in one statement.
  const closed = await c.query<{ closed_at: Date }>(
    `WITH res AS (
       UPDATE reservations SET status = $2, settled_amount = $3, closed_at = now(), reason = coalesce($4, reason) WHERE id = $1
       RETURNING closed_at
     ), led AS (
       INSERT INTO credit_ledger (user_id, kind, idempotency_key, reservation_id, community_delta, purchased_delta, reserved_delta, charged_delta, note)
       VALUES ($5, $6, $6 || ':' || $1, $1, $7, $8, -$9::bigint, $10, $4)
     ), acct AS (
       UPDATE credit_accounts SET community_balance = community_balance + $7, purchased_balance = purchased_balance + $8,
         reserved = reserved - $9, charged = charged + $10, updated_at = now() WHERE user_id = $5
     )
     SELECT closed_at FROM res`,
    [id, status, settledAmount, outcome.reason ?? null, res.userId, outcome.kind, backToCommunity, backToPurchased, res.amount, charge],
  );
  if (!closed.rows[0]) throw new Error(`reservation ${id} vanished while closing it`);
  return { applied: true, reservation: { ...res, status, settledAmount } };
}

/**
 * `settle` inside a caller's transaction (persisting an analysis and charging for it commit
 * together). `lockedAccount`: the reservation's account, whose row this transaction has locked
 * already (refuseDeletedIn); the settle then does not lock it again.
 */
export const settleIn = (c: DbClient, args: { id: string; charge: number; reason?: string; lockedAccount?: string }) =>
  closeIn(c, args.id, { kind: 'settle', charge: args.charge, ...(args.reason !== undefined ? { reason: args.reason } : {}) }, args.lockedAccount);
export const settle = (db: Db, args: { id: string; charge: number; reason?: string }) => inTransaction(db, (c) => settleIn(c, args));
export const release = (db: Db, args: { id: string; reason: string }) => close(db, args.id, { kind: 'release', reason: args.reason });

/**
 * The sweeper: close every open reservation past its expiry, whose workflow ended without closing
 * it (terminated, timed out). Usually a release. But a workflow can end after persisting its
 * analysis and before settling: its caller has the records (every later request for them is a
 * free cache hit), so charge what that run recorded (analysis_runs: its new billable lenses; a
 * vehicle report it saved) rather than hand the analysis out. An extraction answer is never
 * stored, so one the caller never received is not charged. Returns the ids closed.
 */
export interface Swept {
  /** Reservations closed by this pass. */
  ids: string[];
  /** Of those, how many were charged for a persisted run. */
  settled: number;
  /** Credits charged for persisted runs, and credits returned to the pools. */
  charged: number;
  returned: number;
}

export async function sweepExpired(db: Db, limit = 500): Promise<Swept> {
  const r = await db.query<{ id: string; amount: number; recorded: number | null }>(
    `SELECT r.id, r.amount,
            (SELECT a.credits FROM analysis_runs a WHERE a.workflow_id = r.workflow_id)
              + coalesce((SELECT v.credits FROM vehicle_reports v WHERE v.workflow_id = r.workflow_id), 0) AS recorded
       FROM reservations r WHERE r.status = 'open' AND r.expires_at < now() ORDER BY r.expires_at LIMIT $1`,
    [limit],
  );
  const swept: Swept = { ids: [], settled: 0, charged: 0, returned: 0 };
  for (const { id, amount, recorded } of r.rows) {
    const charge = Math.min(Number(recorded ?? 0), amount);
    const out = charge > 0
      ? await settle(db, { id, charge, reason: 'expired: charged what the run persisted' })
      : await release(db, { id, reason: 'expired' });
    if (!out.applied || !out.reservation) continue;
    swept.ids.push(id);
    const charged = out.reservation.settledAmount ?? 0;
    swept.charged += charged;
    swept.returned += out.reservation.amount - charged;
    if (out.reservation.status === 'settled') swept.settled += 1;
  }
  return swept;
}

export interface InvariantReport {
  userId: string;
  ok: boolean;
  problems: string[];
}

/**
 * Check, per account: granted + purchased = balances + reserved + charged; reserved = sum of open
 * reservations; the ledger's deltas add up to the account row.
 */
export async function checkInvariants(db: Db, accountId?: string): Promise<InvariantReport[]> {
  const r = await db.query<{
    user_id: string; community_balance: number; purchased_balance: number; reserved: number; charged: number;
    community_granted: number; purchased_granted: number; open_reserved: number;
    l_community: number; l_purchased: number; l_reserved: number; l_charged: number;
    l_granted_community: number; l_granted_purchased: number;
  }>(
    `SELECT a.user_id, a.community_balance, a.purchased_balance, a.reserved, a.charged, a.community_granted, a.purchased_granted,
            coalesce((SELECT sum(amount) FROM reservations r WHERE r.user_id = a.user_id AND r.status = 'open'), 0) AS open_reserved,
            coalesce(sum(l.community_delta), 0) AS l_community, coalesce(sum(l.purchased_delta), 0) AS l_purchased,
            coalesce(sum(l.reserved_delta), 0) AS l_reserved, coalesce(sum(l.charged_delta), 0) AS l_charged,
            coalesce(sum(l.community_delta) FILTER (WHERE l.kind IN ('grant','purchase')), 0) AS l_granted_community,
            coalesce(sum(l.purchased_delta) FILTER (WHERE l.kind IN ('grant','purchase')), 0) AS l_granted_purchased
       FROM credit_accounts a LEFT JOIN credit_ledger l ON l.user_id = a.user_id
      WHERE ($1::text IS NULL OR a.user_id = $1)
      GROUP BY a.user_id ORDER BY a.user_id`,
    [accountId ?? null],
  );
  return r.rows.map((a) => {
    const n = (v: unknown) => Number(v);
    const problems: string[] = [];
    const granted = n(a.community_granted) + n(a.purchased_granted);
    const held = n(a.community_balance) + n(a.purchased_balance) + n(a.reserved) + n(a.charged);
    if (granted !== held) problems.push(`granted ${granted} != balances+reserved+charged ${held}`);
    if (n(a.reserved) !== n(a.open_reserved)) problems.push(`reserved ${a.reserved} != open reservations ${a.open_reserved}`);
    if (n(a.l_community) !== n(a.community_balance)) problems.push(`ledger community ${a.l_community} != balance ${a.community_balance}`);
    if (n(a.l_purchased) !== n(a.purchased_balance)) problems.push(`ledger purchased ${a.l_purchased} != balance ${a.purchased_balance}`);
    if (n(a.l_reserved) !== n(a.reserved)) problems.push(`ledger reserved ${a.l_reserved} != reserved ${a.reserved}`);
    if (n(a.l_charged) !== n(a.charged)) problems.push(`ledger charged ${a.l_charged} != charged ${a.charged}`);
    if (n(a.l_granted_community) !== n(a.community_granted)) problems.push(`ledger community grants ${a.l_granted_community} != ${a.community_granted}`);
    if (n(a.l_granted_purchased) !== n(a.purchased_granted)) problems.push(`ledger purchases ${a.l_granted_purchased} != ${a.purchased_granted}`);
    return { userId: a.user_id, ok: problems.length === 0, problems };
  });
}

/** A run of a workspace erased while it ran: refused, nothing reserved, recorded or charged (docs/privacy.md). */
export const workspaceDeleted = () => new AppError('AUTH_FAILED', 'This workspace was deleted; nothing was recorded or charged');

/**
 * In a transaction about to record results for a workspace: waits for an erasure holding the
 * account lock and refuses once the workspace is deleted (its records would outlive the erasure).
 * FOR UPDATE, not FOR SHARE: the same transaction then settles, updating this row; two runs of one
 * account each holding a share lock and wanting to update deadlocked (50 concurrent settles of one
 * account took minutes of Postgres deadlock aborts and retries).
 */
export async function refuseDeletedIn(c: DbClient, accountId: string): Promise<void> {
  const r = await c.query<{ deleted: boolean }>(
    'SELECT u.deleted_at IS NOT NULL AS deleted FROM credit_accounts a JOIN users u ON u.id = a.user_id WHERE a.user_id = $1 FOR UPDATE OF a',
    [accountId],
  );
  if (!r.rows[0] || r.rows[0].deleted) throw workspaceDeleted();
}

/** Seconds until the next UTC midnight, when the unbilled-call budget starts again. */
function secondsToUtcMidnight(now = new Date()): number {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
}

function unbilledCapReached(cap: number): AppError {
  return new AppError(
    'RATE_LIMITED',
    `This account made ${cap} unbilled AI provider calls today (free lenses and failed analyses); more run again from 00:00 UTC`,
    { headers: { 'retry-after': String(secondsToUtcMidnight()) } },
  );
}

/** Add `calls` to the account's unbilled vendor calls of today. */
export async function countUnbilledCallsIn(c: DbClient | Db, args: { accountId: string; calls: number }): Promise<void> {
  if (args.calls <= 0) return;
  await c.query(
    `INSERT INTO unbilled_vendor_calls (user_id, day, calls) VALUES ($1, (now() AT TIME ZONE 'utc')::date, $2)
     ON CONFLICT (user_id, day) DO UPDATE SET calls = unbilled_vendor_calls.calls + EXCLUDED.calls`,
    [args.accountId, args.calls],
  );
}
