import { planLimitExceeded, AppError } from '../core/errors.ts';
import { inTransaction, type Db, type DbClient } from '../db/pool.ts';

/**
 * The credit ledger (DESIGN "Credits"). Every movement is one append-only ledger row with an
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

async function lockAccount(c: DbClient, userId: string): Promise<AccountRow> {
  const r = await c.query<AccountRow>(
    'SELECT community_balance, purchased_balance, reserved, referral_bonus FROM credit_accounts WHERE user_id = $1 FOR UPDATE',
    [userId],
  );
  const row = r.rows[0];
  if (!row) throw new AppError('AUTH_FAILED', 'No credit account for this user');
  return row;
}

export async function getBalance(db: Db, userId: string): Promise<Balance> {
  const r = await db.query<AccountRow>(
    'SELECT community_balance, purchased_balance, reserved, referral_bonus FROM credit_accounts WHERE user_id = $1',
    [userId],
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
  userId: string;
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
  await lockAccount(c, args.userId);
  const ins = await c.query(
    `INSERT INTO credit_ledger (user_id, kind, idempotency_key, community_delta, purchased_delta, note)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (user_id, idempotency_key) DO NOTHING`,
    [
      args.userId,
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
      [args.userId, args.amount, args.referral ? args.amount : 0],
    );
  } else {
    await c.query(
      `UPDATE credit_accounts SET purchased_balance = purchased_balance + $2, purchased_granted = purchased_granted + $2,
         packs_purchased = packs_purchased + $3, updated_at = now() WHERE user_id = $1`,
      [args.userId, args.amount, args.kind === 'purchase' ? 1 : 0],
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
  userId: string;
  amount: number;
  ttlMs: number;
  workflowId?: string;
  reason?: string;
}

export async function reserve(db: Db, args: ReserveArgs): Promise<Reservation> {
  return inTransaction(db, (c) => reserveIn(c, args));
}

/** `reserve` inside a caller's transaction. Takes the account-row lock. */
export async function reserveIn(c: DbClient, args: ReserveArgs): Promise<Reservation> {
  if (!Number.isSafeInteger(args.amount) || args.amount <= 0) throw new Error('reserve amount must be a positive integer');
  const acct = await lockAccount(c, args.userId);
  const existing = await findReservation(c, args.id);
  if (existing) {
    if (existing.userId !== args.userId) throw new Error(`reservation ${args.id} belongs to another user`);
    return existing;
  }
  const total = acct.community_balance + acct.purchased_balance;
  if (total < args.amount) {
    throw planLimitExceeded({
      needed: args.amount,
      community: acct.community_balance,
      purchased: acct.purchased_balance,
      total,
      resetsInDays: 0,
    });
  }
  const fromCommunity = Math.min(acct.community_balance, args.amount);
  const fromPurchased = args.amount - fromCommunity;
  const ins = await c.query(
    `INSERT INTO reservations (id, user_id, amount, from_community, from_purchased, workflow_id, reason, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, now() + ($8 || ' milliseconds')::interval)
     RETURNING id, user_id, amount, from_community, from_purchased, status, settled_amount, expires_at`,
    [args.id, args.userId, args.amount, fromCommunity, fromPurchased, args.workflowId ?? null, args.reason ?? null, String(args.ttlMs)],
  );
  await c.query(
    `INSERT INTO credit_ledger (user_id, kind, idempotency_key, reservation_id, community_delta, purchased_delta, reserved_delta)
     VALUES ($1, 'reserve', $2, $3, $4, $5, $6)`,
    [args.userId, `reserve:${args.id}`, args.id, -fromCommunity, -fromPurchased, args.amount],
  );
  await c.query(
    `UPDATE credit_accounts SET community_balance = community_balance - $2, purchased_balance = purchased_balance - $3,
       reserved = reserved + $4, updated_at = now() WHERE user_id = $1`,
    [args.userId, fromCommunity, fromPurchased, args.amount],
  );
  return rowToReservation(ins.rows[0]);
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

async function closeIn(c: DbClient, id: string, outcome: CloseOutcome): Promise<Closed> {
  const peek = await findReservation(c, id);
  if (!peek) return { applied: false, reservation: null };
  await lockAccount(c, peek.userId); // account lock first, same order as reserve: no deadlock
  const res = await findReservation(c, id, true);
  if (!res || res.status !== 'open') return { applied: false, reservation: res };
  const charge = outcome.kind === 'settle' ? outcome.charge : 0;
  if (!Number.isSafeInteger(charge) || charge < 0 || charge > res.amount) {
    throw new Error(`settle charge ${charge} outside 0..${res.amount} for reservation ${id}`);
  }
  const refund = res.amount - charge;
  const backToPurchased = Math.min(refund, res.fromPurchased);
  const backToCommunity = refund - backToPurchased;
  await c.query(
    `UPDATE reservations SET status = $2, settled_amount = $3, closed_at = now(), reason = coalesce($4, reason) WHERE id = $1`,
    [id, outcome.kind === 'settle' ? 'settled' : 'released', outcome.kind === 'settle' ? charge : null, outcome.reason ?? null],
  );
  await c.query(
    `INSERT INTO credit_ledger (user_id, kind, idempotency_key, reservation_id, community_delta, purchased_delta, reserved_delta, charged_delta, note)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [res.userId, outcome.kind, `${outcome.kind}:${id}`, id, backToCommunity, backToPurchased, -res.amount, charge, outcome.reason ?? null],
  );
  await c.query(
    `UPDATE credit_accounts SET community_balance = community_balance + $2, purchased_balance = purchased_balance + $3,
       reserved = reserved - $4, charged = charged + $5, updated_at = now() WHERE user_id = $1`,
    [res.userId, backToCommunity, backToPurchased, res.amount, charge],
  );
  return { applied: true, reservation: await findReservation(c, id) };
}

/** `settle` inside a caller's transaction (persisting an analysis and charging for it commit together). */
export const settleIn = (c: DbClient, args: { id: string; charge: number; reason?: string }) =>
  closeIn(c, args.id, { kind: 'settle', charge: args.charge, ...(args.reason !== undefined ? { reason: args.reason } : {}) });
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
export async function sweepExpired(db: Db, limit = 500): Promise<string[]> {
  const r = await db.query<{ id: string; amount: number; recorded: number | null }>(
    `SELECT r.id, r.amount,
            (SELECT a.credits FROM analysis_runs a WHERE a.workflow_id = r.workflow_id)
              + coalesce((SELECT v.credits FROM vehicle_reports v WHERE v.workflow_id = r.workflow_id), 0) AS recorded
       FROM reservations r WHERE r.status = 'open' AND r.expires_at < now() ORDER BY r.expires_at LIMIT $1`,
    [limit],
  );
  const closed: string[] = [];
  for (const { id, amount, recorded } of r.rows) {
    const charge = Math.min(Number(recorded ?? 0), amount);
    const out = charge > 0
      ? await settle(db, { id, charge, reason: 'expired: charged what the run persisted' })
      : await release(db, { id, reason: 'expired' });
    if (out.applied) closed.push(id);
  }
  return closed;
}

export interface InvariantReport {
  userId: string;
  ok: boolean;
  problems: string[];
}

/**
 * Check, per user: granted + purchased = balances + reserved + charged; reserved = sum of open
 * reservations; the ledger's deltas add up to the account row.
 */
export async function checkInvariants(db: Db, userId?: string): Promise<InvariantReport[]> {
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
    [userId ?? null],
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
