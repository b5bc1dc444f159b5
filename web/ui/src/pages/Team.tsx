import { useState, type FormEvent } from 'react';
import { useLocation } from 'wouter';
import { call, type SessionInfo, type Workspace } from '../api.ts';
import { ActionNotes, ErrorNote } from '../ErrorNote.tsx';
import { day } from '../format.ts';
import { useGet, ws } from '../query.ts';
import { useAction } from '../useAction.ts';
import { SectionPage } from '../workspace.tsx';

type Role = 'owner' | 'admin' | 'member';
interface Member {
  personId: string;
  email: string;
  name: string;
  role: Role;
  since: string;
  activeKeysCreated: number;
}
interface Members {
  members: Member[];
  invitations: Array<{ id: string; email: string; role: string; expiresAt: string }>;
}

/**
 * Team (/team): the workspace's members and open invitations; owners and admins invite (admins
 * only members), owners change roles and hand the workspace over, anyone but the last owner
 * leaves. The server decides every one of these; the page only hides what it would refuse.
 */
export function Team({ session, onChanged }: { session: SessionInfo; onChanged: () => Promise<void> }) {
  return <SectionPage session={session} section="Team">{(w) => <MembersPanel workspace={w} me={session.user.id} onChanged={onChanged} />}</SectionPage>;
}

function MembersPanel({ workspace, me, onChanged }: { workspace: Workspace; me: string; onChanged: () => Promise<void> }) {
  const { id: workspaceId, name: workspaceName, role } = workspace;
  const [, navigate] = useLocation();
  const data = useGet<Members>(ws(workspaceId, 'members'), `/api/v1/workspaces/${workspaceId}/members`);
  const [email, setEmail] = useState('');
  const [inviteRole, setInviteRole] = useState<'member' | 'admin'>('member');
  const [removing, setRemoving] = useState<Member | null>(null);
  const [keysChoice, setKeysChoice] = useState<'keep' | 'revoke'>('revoke');
  const action = useAction();
  // Members, and the keys list (a removal may revoke keys).
  const invalidate = [ws(workspaceId, 'members'), ws(workspaceId, 'keys')];
  const invite = async (e: FormEvent) => {
    e.preventDefault();
    const sent = await action.run({
      run: () => call('POST', `/api/v1/workspaces/${workspaceId}/invitations`, { email, role: inviteRole }),
      fallback: 'Could not send the invitation; try again.',
      done: `Invitation sent to ${email}.`,
      invalidate,
    });
    if (sent !== undefined) setEmail('');
  };
  const owners = data.data?.members.filter((m) => m.role === 'owner').length ?? 0;
  const mayRemove = (m: Member) => m.personId !== me && (role === 'owner' || (role === 'admin' && m.role === 'member'));
  const remove = async (e: FormEvent) => {
    e.preventDefault();
    const m = removing!;
    await action.run({
      run: () => call('DELETE', `/api/v1/workspaces/${workspaceId}/members/${m.personId}`, { keys: keysChoice }),
      fallback: 'Could not remove them; try again.',
      done: `${m.email} was removed${m.activeKeysCreated > 0 ? (keysChoice === 'revoke' ? '; the keys they created are revoked' : '; the keys they created still work') : ''}.`,
      invalidate,
    });
    setRemoving(null);
  };
  const leave = () => {
    if (!window.confirm(`Leave ${workspaceName}? You lose access at once and the API keys you created in it are revoked; an owner can invite you again.`)) return;
    void action.run({
      run: () => call('DELETE', `/api/v1/workspaces/${workspaceId}/members/me`),
      fallback: 'Could not leave the workspace; try again.',
      after: async () => {
        await onChanged();
        navigate('/');
      },
    });
  };
  const transfer = (m: Member) => {
    if (!window.confirm(`Make ${m.email} the owner of ${workspaceName}? You become an admin.`)) return;
    void action.run({
      run: () => call('POST', `/api/v1/workspaces/${workspaceId}/owner`, { personId: m.personId }),
      fallback: 'Could not transfer the workspace; try again.',
      done: `${m.email} owns ${workspaceName} now; you are an admin.`,
      invalidate,
      after: onChanged,
    });
  };
  const changeRole = (m: Member, next: Role) =>
    void action.run({
      run: () => call('PATCH', `/api/v1/workspaces/${workspaceId}/members/${m.personId}`, { role: next }),
      fallback: 'Could not change the role; try again.',
      done: `${m.email} is ${next === 'admin' ? 'an' : 'a'} ${next} now.`,
      invalidate,
      ...(m.personId === me ? { after: onChanged } : {}),
    });
  return (
    <section className="card" aria-labelledby="members-h">
      <h2 id="members-h">Members</h2>
      {role !== 'member' ? (
        <form className="inline" aria-label="Invite a member" onSubmit={(e) => void invite(e)}>
          <label htmlFor="invite-email">Invite by e-mail</label>
          <input id="invite-email" type="email" autoComplete="off" required maxLength={254} value={email} onChange={(e) => setEmail(e.target.value)} />
          <label htmlFor="invite-role">as</label>
          <select id="invite-role" value={inviteRole} onChange={(e) => setInviteRole(e.target.value as 'member' | 'admin')}>
            <option value="member">member (sees usage)</option>
            {role === 'owner' && <option value="admin">admin (also manages keys and members)</option>}
          </select>
          <button type="submit" disabled={action.busy}>
            Send invitation
          </button>
        </form>
      ) : (
        <p className="hint">Owners and admins invite people and manage their roles.</p>
      )}
      <ActionNotes action={action} />
      {removing && (
        <form className="removal" onSubmit={(e) => void remove(e)} aria-labelledby="removal-h">
          <h3 id="removal-h">Remove {removing.email}?</h3>
          <p className="hint">They lose access to {workspaceName} at once, in every browser they are signed in with.</p>
          {removing.activeKeysCreated > 0 ? (
            <fieldset>
              <legend>
                They created {removing.activeKeysCreated} active {removing.activeKeysCreated === 1 ? 'key' : 'keys'}
              </legend>
              <label>
                <input type="radio" name="keys" value="revoke" checked={keysChoice === 'revoke'} onChange={() => setKeysChoice('revoke')} /> Revoke them (requests with them are refused within a second)
              </label>
              <label>
                <input type="radio" name="keys" value="keep" checked={keysChoice === 'keep'} onChange={() => setKeysChoice('keep')} /> Keep them working (your servers may use them)
              </label>
            </fieldset>
          ) : (
            <p className="hint">They created no active keys.</p>
          )}
          <p className="actions">
            <button type="submit" className="danger" disabled={action.busy}>
              Remove {removing.email}
            </button>
            <button type="button" className="quiet" onClick={() => setRemoving(null)}>
              Cancel
            </button>
          </p>
        </form>
      )}
      <ErrorNote text={data.error ? 'Could not load the members; try again.' : null} />
      {!data.data ? (
        !data.error && <p aria-busy="true">Loading members…</p>
      ) : (
        <div className="scroll">
          <table aria-labelledby="members-h">
            <thead>
              <tr>
                <th scope="col">Person</th>
                <th scope="col">Role</th>
                <th scope="col">Since</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody data-testid="members">
              {data.data.members.map((m) => (
                <tr key={m.personId}>
                  <td>{m.email}</td>
                  <td>
                    {role === 'owner' && !(m.role === 'owner' && owners === 1) ? (
                      <select aria-label={`Role of ${m.email}`} value={m.role} disabled={action.busy} onChange={(e) => changeRole(m, e.target.value as Role)}>
                        <option value="owner">owner</option>
                        <option value="admin">admin</option>
                        <option value="member">member</option>
                      </select>
                    ) : (
                      m.role
                    )}
                  </td>
                  <td>{day(m.since)}</td>
                  <td className="rowactions">
                    {m.personId === me ? (
                      !(m.role === 'owner' && owners === 1) && (
                        <button type="button" className="quiet" onClick={leave}>
                          Leave workspace
                        </button>
                      )
                    ) : (
                      <>
                        {role === 'owner' && m.role !== 'owner' && (
                          <button type="button" className="quiet" onClick={() => transfer(m)} aria-label={`Make owner: ${m.email}`}>
                            Make owner
                          </button>
                        )}
                        {mayRemove(m) && (
                          <button
                            type="button"
                            className="danger"
                            aria-label={`Remove ${m.email}`}
                            onClick={() => {
                              setKeysChoice('revoke');
                              setRemoving(m);
                            }}
                          >
                            Remove
                          </button>
                        )}
                      </>
                    )}
                  </td>
                </tr>
              ))}
              {data.data.invitations.map((i) => (
                <tr key={i.id}>
                  <td>{i.email}</td>
                  <td>{i.role} (invited)</td>
                  <td>until {day(i.expiresAt)}</td>
                  <td />
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
