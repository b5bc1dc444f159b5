import { revokeAccountKey } from './keys.ts';
import type { KeyCache } from '../auth/cache.ts';
import type { EvictionBus } from '../auth/eviction-bus.ts';
import { AppError } from '../core/errors.ts';
import { inTransaction, type Db, type DbClient } from '../db/pool.ts';
import { refuseBeyondOwnedCap, type Role } from './workspaces.ts';

/**
 * Managing a workspace's people after they joined: remove, leave, change a role, transfer
 * ownership. The rules (docs/decisions.md "Finishing the team"):
 *
 * - owners manage everyone, owners included; admins remove members only (as they invite members
 *   only); members can only leave; anyone can leave;
 * - roles change only by an owner's hand;
 * - a workspace keeps at least one owner: the last owner cannot be removed, demoted or leave;
 * - every change takes the workspace's member rows FOR UPDATE first, so two owners demoting each
 *   other at once cannot leave the workspace without one.
 *
 * Access is per request (`requireMember` reads the membership row each time), so a removed person's
 * open sessions lose the workspace at once; what outlives a request is ended here: their pending
 * invitations to it, their untaken uploads for it, and (when the remover says so) the keys they
 * created.
 */
export type KeysChoice = 'keep' | 'revoke';

export interface MemberDeps {
  db: Db;
  keyCache: KeyCache;
  evictionBus?: EvictionBus;
}

const noSuchMember = () => new AppError('NOT_FOUND', 'No such member in this workspace');
const lastOwner = () => new AppError('FORBIDDEN', 'A workspace keeps at least one owner: make someone else owner first');

type Locked = Map<string, Role>;

/** The workspace's members, locked for this transaction; 404 when the actor is not one of them. */
async function lockMembers(c: DbClient, workspaceId: string, actorId: string): Promise<{ members: Locked; actorRole: Role; personal: boolean }> {
  const r = await c.query<{ console_user_id: string; role: Role; kind: string }>(
    `SELECT m.console_user_id, m.role, u.kind FROM workspace_members m JOIN users u ON u.id = m.workspace_id
      WHERE m.workspace_id = $1 ORDER BY m.console_user_id FOR UPDATE OF m`,
    [workspaceId],
  );
  const members: Locked = new Map(r.rows.map((row) => [row.console_user_id, row.role]));
  const actorRole = members.get(actorId);
  if (!actorRole) throw new AppError('NOT_FOUND', 'No such workspace');
  return { members, actorRole, personal: r.rows[0]!.kind === 'personal' };
}

/**
 * A person's own workspace stays theirs: its owner is not removed, demoted or replaced, and nobody
 * else becomes an owner of it (a person without their own workspace would be given a new one, with
 * new signup credits, at the next sign-in). Teams are where ownership is shared and handed over.
 */
const personalOwnership = () => new AppError('FORBIDDEN', "A personal workspace's owner stays its owner; share ownership in a team workspace instead");

const owners = (members: Locked) => [...members.values()].filter((r) => r === 'owner').length;

export interface Removal {
  personId: string;
  keysRevoked: string[];
  keysKept: string[];
  invitationsWithdrawn: number;
  uploadsDeleted: number;
}

/**
 * Take a person out of a workspace (`actorId === personId` is leaving). The keys they created are
 * revoked (and evicted from every API process) or kept, as `keys` says. A person leaving always has
 * the keys they made in this workspace revoked: otherwise someone about to be removed leaves first
 * and keeps the workspace's API access with nobody having chosen it (docs/decisions.md).
 */
export async function removeMember(deps: MemberDeps, args: { workspaceId: string; actorId: string; personId: string; keys: KeysChoice }): Promise<Removal> {
  const leaving = args.actorId === args.personId;
  const done = await inTransaction(deps.db, async (c) => {
    const { members, actorRole, personal } = await lockMembers(c, args.workspaceId, args.actorId);
    const target = members.get(args.personId);
    if (!target) throw noSuchMember();
    if (personal && target === 'owner') throw personalOwnership();
    if (!leaving) {
      if (actorRole === 'member') throw new AppError('FORBIDDEN', 'Members cannot remove anyone; they can leave the workspace');
      if (actorRole === 'admin' && target !== 'member') throw new AppError('FORBIDDEN', `Admins remove members only; removing an ${target} needs an owner`);
    }
    if (target === 'owner' && owners(members) === 1) throw lastOwner();
    await c.query('DELETE FROM workspace_members WHERE workspace_id = $1 AND console_user_id = $2', [args.workspaceId, args.personId]);
    // Invitations they sent and nobody accepted yet stop working: the workspace did not choose those people.
    const withdrawn = await c.query('DELETE FROM workspace_invitations WHERE workspace_id = $1 AND invited_by = $2 AND accepted_at IS NULL', [args.workspaceId, args.personId]);
    // Their console uploads no batch took go with them (unfinished bytes expire in the upload datastore, finished ones' blobs go to the collector).
    const uploads = await c.query<{ id: string }>('DELETE FROM uploads WHERE user_id = $1 AND person_id = $2 AND taken_at IS NULL RETURNING id', [args.workspaceId, args.personId]);
    const keys = await c.query<{ id: string }>('SELECT id FROM api_keys WHERE user_id = $1 AND created_by = $2 AND revoked_at IS NULL ORDER BY created_at', [args.workspaceId, args.personId]);
    return { withdrawn: withdrawn.rowCount ?? 0, uploads: uploads.rows.map((u) => u.id), keys: keys.rows.map((k) => k.id) };
  });
  // After the commit: the membership is gone whatever happens next; a revocation that fails here
  // is retried by revoking the key again (idempotent), and the person can no longer do it.
  const revoke = args.keys === 'revoke' || leaving;
  if (revoke) {
    for (const keyId of done.keys) {
      await revokeAccountKey({ db: deps.db, keyCache: deps.keyCache, ...(deps.evictionBus ? { evictionBus: deps.evictionBus } : {}) }, { accountId: args.workspaceId, keyId });
    }
  }
  return {
    personId: args.personId,
    keysRevoked: revoke ? done.keys : [],
    keysKept: revoke ? [] : done.keys,
    invitationsWithdrawn: done.withdrawn,
    uploadsDeleted: done.uploads.length,
  };
}

/** The cap on owned team workspaces (accounts/workspaces.ts) holds for ownership handed over too. */
const ownedCap = (n: number) => `That person owns ${n} team workspaces already, the most one person may own; nothing was changed`;

/** An owner sets a member's role (their own included, while another owner remains). */
export async function changeRole(db: Db, args: { workspaceId: string; actorId: string; personId: string; role: Role }): Promise<{ personId: string; role: Role }> {
  return inTransaction(db, async (c) => {
    const { members, actorRole, personal } = await lockMembers(c, args.workspaceId, args.actorId);
    if (actorRole !== 'owner') throw new AppError('FORBIDDEN', `Only an owner changes roles; yours is ${actorRole}`);
    const current = members.get(args.personId);
    if (!current) throw noSuchMember();
    if (personal && (current === 'owner' || args.role === 'owner') && current !== args.role) throw personalOwnership();
    if (current === 'owner' && args.role !== 'owner' && owners(members) === 1) throw lastOwner();
    if (args.role === 'owner' && current !== 'owner') await refuseBeyondOwnedCap(c, args.personId, ownedCap);
    await c.query('UPDATE workspace_members SET role = $3 WHERE workspace_id = $1 AND console_user_id = $2', [args.workspaceId, args.personId, args.role]);
    return { personId: args.personId, role: args.role };
  });
}

/** An owner hands the workspace to another member: they become owner, the giver an admin. One step. */
export async function transferOwnership(db: Db, args: { workspaceId: string; actorId: string; personId: string }): Promise<{ owner: string; previousOwner: string }> {
  return inTransaction(db, async (c) => {
    const { members, actorRole, personal } = await lockMembers(c, args.workspaceId, args.actorId);
    if (actorRole !== 'owner') throw new AppError('FORBIDDEN', `Only an owner transfers ownership; yours is ${actorRole}`);
    if (personal) throw personalOwnership();
    if (args.personId === args.actorId) throw new AppError('VALIDATION_FAILED', 'personId: you own this workspace already; name the member to hand it to');
    const current = members.get(args.personId);
    if (!current) throw noSuchMember();
    if (current !== 'owner') await refuseBeyondOwnedCap(c, args.personId, ownedCap);
    await c.query(`UPDATE workspace_members SET role = 'owner' WHERE workspace_id = $1 AND console_user_id = $2`, [args.workspaceId, args.personId]);
    await c.query(`UPDATE workspace_members SET role = 'admin' WHERE workspace_id = $1 AND console_user_id = $2`, [args.workspaceId, args.actorId]);
    return { owner: args.personId, previousOwner: args.actorId };
  });
}

/** Active keys per person who made them, for the members list (what a removal would keep or revoke). */
export async function keysByCreator(db: Db, workspaceId: string): Promise<Map<string, number>> {
  const r = await db.query<{ created_by: string; n: number }>(
    'SELECT created_by, count(*)::int AS n FROM api_keys WHERE user_id = $1 AND created_by IS NOT NULL AND revoked_at IS NULL GROUP BY created_by',
    [workspaceId],
  );
  return new Map(r.rows.map((row) => [row.created_by, row.n]));
}

/** The console made this key for this person (keys made elsewhere name no creator). */
export async function recordKeyCreator(db: Db, keyId: string, personId: string): Promise<void> {
  await db.query('UPDATE api_keys SET created_by = $2 WHERE id = $1', [keyId, personId]);
}
