import { createHash, randomBytes } from 'node:crypto';
import { newId } from '../auth/repository.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import { grantSignupCredits } from '../credits/signup.ts';
import { inTransaction, type Db, type DbClient } from '../db/pool.ts';
import { createBillingAccountIn } from './billing-accounts.ts';
import { nameProblem } from './names.ts';

/**
 * A workspace is the account the API knows (users.id: credits, keys, registry); people are its
 * members with a role. Every console route asks `requireMember` first, and a workspace the person
 * is not in answers 404, never 403: whether it exists is not theirs to learn.
 */
export type Role = 'owner' | 'admin' | 'member';

export interface Workspace {
  id: string;
  name: string;
  role: Role;
  /** A personal workspace goes with its person's account; a team workspace can be deleted on its own. */
  kind?: 'personal' | 'team';
}

export const workspaceNotFound = () => new AppError('NOT_FOUND', 'No such workspace');

/**
 * A person proved their address: give them their personal workspace, once. An API account an
 * operator made earlier for that same address (and nobody holds yet) becomes theirs; otherwise a
 * new one is made. The first verification grants the workspace its 1,000 community credits (once
 * ever: the ledger's idempotency key) and marks its address verified. Serialized per person, so
 * two verifications racing make one workspace.
 */
export async function ensurePersonalWorkspace(db: Db, person: { id: string; email: string }): Promise<string> {
  return inTransaction(db, async (c) => {
    await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`person:${person.id}`]);
    const mine = await c.query<{ workspace_id: string }>(
      `SELECT m.workspace_id FROM workspace_members m JOIN users u ON u.id = m.workspace_id
        WHERE m.console_user_id = $1 AND m.role = 'owner' AND u.kind = 'personal' ORDER BY m.created_at LIMIT 1`,
      [person.id],
    );
    if (mine.rows[0]) return mine.rows[0].workspace_id;
    const orphan = await c.query<{ id: string }>(
      `SELECT u.id FROM users u WHERE lower(u.email) = lower($1) AND u.kind = 'personal'
          AND NOT EXISTS (SELECT 1 FROM workspace_members m WHERE m.workspace_id = u.id)
        ORDER BY u.created_at LIMIT 1 FOR UPDATE`,
      [person.email],
    );
    let workspaceId = orphan.rows[0]?.id;
    if (!workspaceId) {
      workspaceId = await createBillingAccountIn(c, { email: person.email, verified: true });
    } else {
      await c.query('UPDATE users SET email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1', [workspaceId]);
    }
    await c.query(`INSERT INTO workspace_members (workspace_id, console_user_id, role) VALUES ($1, $2, 'owner')`, [workspaceId, person.id]);
    await grantSignupCredits(c, workspaceId, 'emailVerified');
    return workspaceId;
  });
}

export async function workspacesOf(db: Db, personId: string): Promise<Workspace[]> {
  const r = await db.query<{ id: string; name: string; role: Role; kind: 'personal' | 'team' }>(
    `SELECT u.id, coalesce(u.name, u.email) AS name, m.role, u.kind FROM workspace_members m JOIN users u ON u.id = m.workspace_id
      WHERE m.console_user_id = $1 ORDER BY m.created_at, u.id`,
    [personId],
  );
  return r.rows.map((row) => ({ id: row.id, name: row.name, role: row.role, kind: row.kind }));
}

/** The person's role in the workspace; 404 when they are not a member (or it does not exist). */
export async function requireMember(db: Db, personId: string, workspaceId: string, allowed: readonly Role[] = ['owner', 'admin', 'member']): Promise<Role> {
  const r = await db.query<{ role: Role }>('SELECT role FROM workspace_members WHERE workspace_id = $1 AND console_user_id = $2', [workspaceId, personId]);
  const role = r.rows[0]?.role;
  if (!role) throw workspaceNotFound();
  if (!allowed.includes(role)) throw new AppError('FORBIDDEN', `This needs the ${allowed.join(' or ')} role in the workspace; yours is ${role}`);
  return role;
}

/**
 * Team workspaces one person may own (docs/decisions.md "Batches: no intake without credits"):
 * each is another account with its own caps (event streams, batch concurrency), so their number
 * is bounded. The personal workspace does not count.
 */
export const MAX_OWNED_TEAM_WORKSPACES = 10;

/**
 * Inside a transaction about to make `personId` the owner of one more team workspace (creating
 * one, a transfer, a promotion): takes the per-person lock, so concurrent grants cannot pass the
 * cap, and refuses with 403 once they own MAX_OWNED_TEAM_WORKSPACES.
 */
export async function refuseBeyondOwnedCap(c: DbClient, personId: string, message: (owned: number) => string): Promise<void> {
  await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`person:${personId}`]);
  const owned = await c.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM workspace_members m JOIN users u ON u.id = m.workspace_id WHERE m.console_user_id = $1 AND m.role = 'owner' AND u.kind = 'team'`,
    [personId],
  );
  const n = owned.rows[0]!.n;
  if (n >= MAX_OWNED_TEAM_WORKSPACES) throw new AppError('FORBIDDEN', message(n));
}

/** A workspace name as typed, trimmed; VALIDATION_FAILED when empty, over NAME_MAX characters, or holding control characters (accounts/names.ts). */
function workspaceName(name: string): string {
  const clean = name.trim();
  if (clean.length < 1) throw validationFailed('name: 1 to 80 characters');
  const problem = nameProblem(clean, 'name');
  if (problem) throw validationFailed(problem);
  return clean;
}

/**
 * Renames a workspace that is not erased (the caller has checked the person's role). Bounded as a
 * new workspace's name is; a personal workspace so named shows the name instead of its address.
 */
export async function renameWorkspace(db: Db, workspaceId: string, name: string): Promise<{ id: string; name: string }> {
  const clean = workspaceName(name);
  const r = await db.query('UPDATE users SET name = $2 WHERE id = $1 AND deleted_at IS NULL', [workspaceId, clean]);
  if (r.rowCount !== 1) throw workspaceNotFound();
  return { id: workspaceId, name: clean };
}

/**
 * A team workspace: its own credits, keys and registry; the creator is its owner. No signup
 * credits. 403 once the person owns MAX_OWNED_TEAM_WORKSPACES (counted under a per-person lock,
 * so concurrent creations cannot pass it).
 */
export async function createTeamWorkspace(db: Db, person: { id: string; email: string }, name: string): Promise<Workspace> {
  const clean = workspaceName(name);
  const id = await inTransaction(db, async (c) => {
    await refuseBeyondOwnedCap(c, person.id, (n) => `You own ${n} team workspaces, the most one person may own; use one of them`);
    const id = await createBillingAccountIn(c, { email: person.email, kind: 'team', name: clean, verified: true });
    await c.query(`INSERT INTO workspace_members (workspace_id, console_user_id, role) VALUES ($1, $2, 'owner')`, [id, person.id]);
    return id;
  });
  return { id, name: clean, role: 'owner' };
}

export interface Member {
  personId: string;
  email: string;
  name: string;
  role: Role;
  since: string;
}

export async function listMembers(db: Db, workspaceId: string): Promise<Member[]> {
  const r = await db.query<{ id: string; email: string; name: string; role: Role; created_at: Date }>(
    `SELECT p.id, p.email, p.name, m.role, m.created_at FROM workspace_members m JOIN console_users p ON p.id = m.console_user_id
      WHERE m.workspace_id = $1 ORDER BY m.created_at, p.id`,
    [workspaceId],
  );
  return r.rows.map((row) => ({ personId: row.id, email: row.email, name: row.name, role: row.role, since: row.created_at.toISOString() }));
}

export interface PendingInvitation {
  id: string;
  email: string;
  role: 'admin' | 'member';
  expiresAt: string;
}

export async function listInvitations(db: Db, workspaceId: string): Promise<PendingInvitation[]> {
  const r = await db.query<{ id: string; email: string; role: 'admin' | 'member'; expires_at: Date }>(
    `SELECT id, email, role, expires_at FROM workspace_invitations
      WHERE workspace_id = $1 AND accepted_at IS NULL AND expires_at > now() ORDER BY created_at`,
    [workspaceId],
  );
  return r.rows.map((row) => ({ id: row.id, email: row.email, role: row.role, expiresAt: row.expires_at.toISOString() }));
}

export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;
/**
 * An address as browsers validate `<input type=email>` (the HTML standard's grammar), with a dot in
 * the domain: no spaces, quotes, angle brackets or markup, nothing an SMTP server would refuse
 * after the invitation was already written.
 */
const EMAIL = /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+$/;
const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * Invite an address: a random token for the mailed link (only its hash is kept). Owners may invite
 * admins and members, admins only members. A newer invitation for the same address replaces a
 * pending one, so one link works.
 */
export async function inviteMember(
  db: Db,
  args: { workspaceId: string; inviter: { id: string; role: Role }; email: string; role: 'admin' | 'member' },
): Promise<{ token: string; invitation: PendingInvitation; workspaceName: string }> {
  const email = args.email.trim().toLowerCase();
  if (email.length > 254 || !EMAIL.test(email)) throw validationFailed('email: not an e-mail address (letters, digits and . _ + - before the @, a domain name after it)');
  if (args.role === 'admin' && args.inviter.role !== 'owner') throw new AppError('FORBIDDEN', 'Only an owner can invite admins');
  return inTransaction(db, async (c) => {
    const member = await c.query(
      'SELECT 1 FROM workspace_members m JOIN console_users p ON p.id = m.console_user_id WHERE m.workspace_id = $1 AND lower(p.email) = $2',
      [args.workspaceId, email],
    );
    if (member.rowCount) throw validationFailed(`email: ${email} is already a member of this workspace`);
    await c.query('DELETE FROM workspace_invitations WHERE workspace_id = $1 AND lower(email) = $2 AND accepted_at IS NULL', [args.workspaceId, email]);
    const token = `inv_${randomBytes(32).toString('base64url')}`;
    const id = newId('inv');
    const expiresAt = new Date(Date.now() + INVITATION_TTL_MS);
    await c.query(
      'INSERT INTO workspace_invitations (id, workspace_id, email, role, token_hash, invited_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [id, args.workspaceId, email, args.role, hashToken(token), args.inviter.id, expiresAt],
    );
    const ws = await c.query<{ name: string }>('SELECT coalesce(name, email) AS name FROM users WHERE id = $1', [args.workspaceId]);
    return { token, invitation: { id, email, role: args.role, expiresAt: expiresAt.toISOString() }, workspaceName: ws.rows[0]!.name };
  });
}

/**
 * Accept an invitation as the signed-in person: only with the very address it was sent to,
 * verified, once, before it expires. Concurrent accepts of one token serialize on its row.
 */
export async function acceptInvitation(db: Db, args: { token: string; person: { id: string; email: string; emailVerified: boolean } }): Promise<Workspace> {
  const invalid = (why: string) => validationFailed(`token: ${why}; ask the workspace for a new invitation`);
  if (!/^inv_[A-Za-z0-9_-]{43}$/.test(args.token)) throw invalid('not an invitation token');
  return inTransaction(db, async (c) => {
    const r = await c.query<{ id: string; workspace_id: string; email: string; role: 'admin' | 'member'; expires_at: Date; accepted_at: Date | null }>(
      'SELECT id, workspace_id, email, role, expires_at, accepted_at FROM workspace_invitations WHERE token_hash = $1 FOR UPDATE',
      [hashToken(args.token)],
    );
    const inv = r.rows[0];
    if (!inv) throw invalid('unknown invitation');
    if (inv.accepted_at) throw invalid('this invitation was already used');
    if (inv.expires_at.getTime() <= Date.now()) throw invalid('this invitation has expired');
    if (!args.person.emailVerified || args.person.email.toLowerCase() !== inv.email.toLowerCase()) {
      throw new AppError('FORBIDDEN', `This invitation is for ${inv.email}: sign in with that address (confirmed) to accept it`);
    }
    await c.query(
      `INSERT INTO workspace_members (workspace_id, console_user_id, role) VALUES ($1, $2, $3) ON CONFLICT (workspace_id, console_user_id) DO NOTHING`,
      [inv.workspace_id, args.person.id, inv.role],
    );
    await c.query('UPDATE workspace_invitations SET accepted_at = now(), accepted_by = $2 WHERE id = $1', [inv.id, args.person.id]);
    const ws = await c.query<{ name: string; role: Role }>(
      'SELECT coalesce(u.name, u.email) AS name, m.role FROM users u JOIN workspace_members m ON m.workspace_id = u.id AND m.console_user_id = $2 WHERE u.id = $1',
      [inv.workspace_id, args.person.id],
    );
    return { id: inv.workspace_id, name: ws.rows[0]!.name, role: ws.rows[0]!.role };
  });
}

/** An invitation nobody was told about (its mail could not be sent) is not left behind. */
export async function withdrawInvitation(db: Db, invitationId: string): Promise<void> {
  await db.query('DELETE FROM workspace_invitations WHERE id = $1', [invitationId]);
}

/** What a workspace is (personal or team) and its name; null when there is no such account. */
export async function workspaceKind(db: Db, workspaceId: string): Promise<{ kind: string; name: string | null } | null> {
  const r = await db.query<{ kind: string; name: string | null }>('SELECT kind, name FROM users WHERE id = $1', [workspaceId]);
  return r.rows[0] ?? null;
}

/** Days a workspace's original bytes are kept (docs/privacy.md "Retention"); null: while the registry holds the photo. */
export async function retentionDays(db: Db, workspaceId: string): Promise<number | null> {
  const r = await db.query<{ retention_days: number | null }>('SELECT retention_days FROM users WHERE id = $1', [workspaceId]);
  return r.rows[0]?.retention_days ?? null;
}

/** Sets the retention of a workspace that is not erased. */
export async function setRetentionDays(db: Db, workspaceId: string, days: number | null): Promise<void> {
  await db.query('UPDATE users SET retention_days = $2 WHERE id = $1 AND deleted_at IS NULL', [workspaceId, days]);
}

export interface Membership {
  workspaceId: string;
  kind: string;
  name: string | null;
  role: string;
  /** How many owners the workspace has. */
  owners: number;
}

/** Every workspace a person is a member of, the oldest membership first, with its count of owners. */
export async function membershipsOf(db: Db, personId: string): Promise<Membership[]> {
  const r = await db.query<{ workspace_id: string; kind: string; name: string | null; role: string; owners: number }>(
    `SELECT m.workspace_id, u.kind, u.name, m.role,
            (SELECT count(*)::int FROM workspace_members o WHERE o.workspace_id = m.workspace_id AND o.role = 'owner') AS owners
       FROM workspace_members m JOIN users u ON u.id = m.workspace_id WHERE m.console_user_id = $1 ORDER BY m.created_at`,
    [personId],
  );
  return r.rows.map((m) => ({ workspaceId: m.workspace_id, kind: m.kind, name: m.name, role: m.role, owners: m.owners }));
}
