import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBillingAccount } from '../../accounts/billing-accounts.ts';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { acceptInvitation, createTeamWorkspace, ensurePersonalWorkspace, inviteMember, listInvitations, requireMember, workspacesOf } from '../../accounts/workspaces.ts';
import { testConfig } from '../harness/env.ts';

let db: Db;
beforeAll(() => {
  db = createPool(testConfig().DATABASE_URL, { max: 6 });
});
afterAll(async () => db?.end());

async function person(email = `p-${randomBytes(6).toString('hex')}@example.test`) {
  const id = `cu_${randomBytes(8).toString('hex')}`;
  await db.query('INSERT INTO console_users (id, name, email, email_verified, updated_at) VALUES ($1, $2, $3, true, now())', [id, 'P', email]);
  return { id, email };
}

describe('personal workspaces', () => {
  it('makes one workspace with 1,000 community credits, however many verifications race', async () => {
    const p = await person();
    const ids = await Promise.all(Array.from({ length: 6 }, () => ensurePersonalWorkspace(db, p)));
    expect(new Set(ids).size).toBe(1);
    expect(await workspacesOf(db, p.id)).toEqual([{ id: ids[0], name: p.email, role: 'owner', kind: 'personal' }]);
    expect(await getBalance(db, ids[0]!)).toMatchObject({ community: 1000, purchased: 0 });
    const verified = await db.query('SELECT email_verified_at FROM users WHERE id = $1', [ids[0]]);
    expect(verified.rows[0].email_verified_at).not.toBeNull();
    expect(await checkInvariants(db, ids[0])).toEqual([{ userId: ids[0], ok: true, problems: [] }]);
  });

  it('takes over the API account an operator made for the same address, granting its credits once ever', async () => {
    const email = `Op-${randomBytes(6).toString('hex')}@Example.test`;
    const { accountId } = await createBillingAccount(db, email);
    const p = await person(email.toLowerCase());
    expect(await ensurePersonalWorkspace(db, p)).toBe(accountId);
    expect(await ensurePersonalWorkspace(db, p)).toBe(accountId);
    expect((await getBalance(db, accountId)).community).toBe(1000);
    // A second person with that address (another identity) does not get the same workspace.
    const q = await person(`x${email.toLowerCase()}`);
    expect(await ensurePersonalWorkspace(db, q)).not.toBe(accountId);
  });

  it("answers 404 (not 403) for a workspace one is not a member of, and checks roles", async () => {
    const a = await person();
    const b = await person();
    const wa = await ensurePersonalWorkspace(db, a);
    await expect(requireMember(db, b.id, wa)).rejects.toMatchObject({ code: 'NOT_FOUND', status: 404 });
    await expect(requireMember(db, a.id, 'usr_missing')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await db.query(`INSERT INTO workspace_members (workspace_id, console_user_id, role) VALUES ($1, $2, 'member')`, [wa, b.id]);
    expect(await requireMember(db, b.id, wa)).toBe('member');
    await expect(requireMember(db, b.id, wa, ['owner', 'admin'])).rejects.toMatchObject({ code: 'FORBIDDEN', status: 403 });
  });
});

describe('team workspaces and invitations', () => {
  it('a team workspace has its own empty account, and the address stays free for a personal one', async () => {
    const p = await person();
    const team = await createTeamWorkspace(db, p, '  Fleet Ops  ');
    expect(team).toMatchObject({ name: 'Fleet Ops', role: 'owner' });
    expect(await getBalance(db, team.id)).toMatchObject({ community: 0, purchased: 0 });
    const personal = await ensurePersonalWorkspace(db, p);
    expect(personal).not.toBe(team.id);
    expect((await workspacesOf(db, p.id)).map((w) => w.name).sort()).toEqual(['Fleet Ops', p.email].sort());
    await expect(createTeamWorkspace(db, p, ' ')).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('roles bound invitations; a newer one replaces a pending one; members cannot be invited twice', async () => {
    const owner = await person();
    const ws = await createTeamWorkspace(db, owner, 'Roles');
    const invitee = await person();
    await expect(inviteMember(db, { workspaceId: ws.id, inviter: { id: owner.id, role: 'admin' }, email: invitee.email, role: 'admin' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const first = await inviteMember(db, { workspaceId: ws.id, inviter: { id: owner.id, role: 'owner' }, email: invitee.email.toUpperCase(), role: 'member' });
    const second = await inviteMember(db, { workspaceId: ws.id, inviter: { id: owner.id, role: 'owner' }, email: invitee.email, role: 'admin' });
    expect((await listInvitations(db, ws.id)).map((i) => [i.email, i.role])).toEqual([[invitee.email, 'admin']]);
    await expect(acceptInvitation(db, { token: first.token, person: { ...invitee, emailVerified: true } })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    // Only a confirmed address accepts.
    await expect(acceptInvitation(db, { token: second.token, person: { ...invitee, emailVerified: false } })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    // Two accepts racing: one membership, one of them refused.
    const results = await Promise.allSettled([1, 2].map(() => acceptInvitation(db, { token: second.token, person: { ...invitee, emailVerified: true } })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(await requireMember(db, invitee.id, ws.id)).toBe('admin');
    await expect(inviteMember(db, { workspaceId: ws.id, inviter: { id: owner.id, role: 'owner' }, email: invitee.email, role: 'member' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('an expired invitation is refused', async () => {
    const owner = await person();
    const ws = await createTeamWorkspace(db, owner, 'Expiry');
    const invitee = await person();
    const inv = await inviteMember(db, { workspaceId: ws.id, inviter: { id: owner.id, role: 'owner' }, email: invitee.email, role: 'member' });
    await db.query(`UPDATE workspace_invitations SET expires_at = now() - interval '1 second' WHERE id = $1`, [inv.invitation.id]);
    await expect(acceptInvitation(db, { token: inv.token, person: { ...invitee, emailVerified: true } })).rejects.toMatchObject({ message: expect.stringContaining('expired') });
    await expect(requireMember(db, invitee.id, ws.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
