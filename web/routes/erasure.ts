import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { eraseWorkspace, type EraseDeps } from '../accounts/erase.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import { removeMember, type MemberDeps } from './members.ts';
import { requireMember } from '../accounts/workspaces.ts';

const params = z.object({ workspaceId: z.string().min(1).max(100) });
const deleteWorkspaceBody = z.strictObject({ confirm: z.string().max(200) });
const deleteAccountBody = z.strictObject({ confirm: z.string().max(400) });
/** Days the original bytes are kept (docs/privacy.md "Retention"); null: kept while the registry holds the photo. */
const settingsBody = z.strictObject({ retentionDays: z.number().int().min(1).max(3650).nullable() });

function parse<T extends z.ZodType>(what: string, schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) throw validationFailed(`${what}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

export type ErasureDeps = Omit<EraseDeps, 'keyCache' | 'evictionBus'> & MemberDeps;

/**
 * The console's erasure and retention routes (docs/privacy.md):
 * - `GET|PATCH …/workspaces/{id}/settings` `{"retentionDays": n | null}`: how long original bytes are kept (owners change it);
 * - `DELETE …/workspaces/{id}` `{"confirm": "<its name>"}`: an owner erases a team workspace;
 * - `DELETE /api/v1/account` `{"confirm": "<your address>"}`: a person erases their console account
 *   and personal workspace; refused while they are the only owner of a team workspace.
 */
export function registerErasureRoutes(
  app: FastifyInstance,
  deps: ErasureDeps | null,
  signedIn: (request: FastifyRequest) => Promise<{ id: string; email: string }>,
): void {
  const base = '/api/v1/workspaces/:workspaceId';
  const needDeps = (): ErasureDeps => {
    if (!deps) throw new AppError('SERVICE_UNAVAILABLE', 'Erasure needs the blob store, which this console server was started without');
    return deps;
  };

  app.get(`${base}/settings`, async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = parse('path', params, request.params);
    await requireMember(needDeps().db, person.id, workspaceId);
    const r = await needDeps().db.query<{ retention_days: number | null }>('SELECT retention_days FROM users WHERE id = $1', [workspaceId]);
    return { retentionDays: r.rows[0]?.retention_days ?? null };
  });

  app.patch(`${base}/settings`, async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = parse('path', params, request.params);
    const { retentionDays } = parse('body', settingsBody, request.body);
    await requireMember(needDeps().db, person.id, workspaceId, ['owner']);
    await needDeps().db.query('UPDATE users SET retention_days = $2 WHERE id = $1 AND deleted_at IS NULL', [workspaceId, retentionDays]);
    return { retentionDays };
  });

  app.delete(base, async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = parse('path', params, request.params);
    const { confirm } = parse('body', deleteWorkspaceBody, request.body);
    const d = needDeps();
    await requireMember(d.db, person.id, workspaceId, ['owner']);
    const ws = (await d.db.query<{ kind: string; name: string | null }>('SELECT kind, name FROM users WHERE id = $1', [workspaceId])).rows[0]!;
    if (ws.kind !== 'team') throw new AppError('FORBIDDEN', 'Your personal workspace is erased with your account (Account → Delete account), not on its own');
    if (confirm !== ws.name) throw validationFailed('confirm: type the workspace’s name exactly as it is shown to delete it; nothing was deleted');
    const erased = await eraseWorkspace(d, workspaceId);
    if (!erased) throw new AppError('NOT_FOUND', 'No such workspace');
    request.log.info({ workspaceId, photos: erased.photos, keys: erased.keysRevoked }, 'workspace erased');
    return { erased };
  });

  app.delete('/api/v1/account', async (request) => {
    const person = await signedIn(request);
    const { confirm } = parse('body', deleteAccountBody, request.body);
    const d = needDeps();
    if (confirm.trim().toLowerCase() !== person.email.toLowerCase()) {
      throw validationFailed('confirm: type your e-mail address to delete your account; nothing was deleted');
    }
    const memberships = await d.db.query<{ workspace_id: string; kind: string; name: string | null; role: string; owners: number }>(
      `SELECT m.workspace_id, u.kind, u.name, m.role,
              (SELECT count(*)::int FROM workspace_members o WHERE o.workspace_id = m.workspace_id AND o.role = 'owner') AS owners
         FROM workspace_members m JOIN users u ON u.id = m.workspace_id WHERE m.console_user_id = $1 ORDER BY m.created_at`,
      [person.id],
    );
    // A team workspace whose only owner this person is would be left without anyone who can manage
    // or erase it: refused until it is handed over or deleted (docs/decisions.md).
    const sole = memberships.rows.filter((m) => m.kind === 'team' && m.role === 'owner' && m.owners === 1);
    if (sole.length) {
      throw new AppError('FORBIDDEN', `You are the only owner of ${sole.map((m) => `“${m.name}”`).join(', ')}: hand ${sole.length === 1 ? 'it' : 'them'} over to another member or delete ${sole.length === 1 ? 'it' : 'them'} first; nothing was deleted`);
    }
    const erased: string[] = [];
    for (const m of memberships.rows) {
      if (m.kind === 'personal' && m.role === 'owner') {
        if (await eraseWorkspace(d, m.workspace_id)) erased.push(m.workspace_id);
      } else {
        // Leaving, as from the members page: the keys this person made there are revoked.
        await removeMember(d, { workspaceId: m.workspace_id, actorId: person.id, personId: person.id, keys: 'revoke' });
      }
    }
    // The person: sessions, sign-in methods, pending invitations they sent and memberships go by cascade
    // (the keys they made in team workspaces were revoked above, as on leaving).
    await d.db.query('DELETE FROM console_verifications WHERE lower(identifier) = lower($1)', [person.email]);
    await d.db.query('DELETE FROM console_users WHERE id = $1', [person.id]);
    request.log.info({ workspacesErased: erased.length }, 'console account erased');
    return { deleted: true, workspacesErased: erased };
  });
}
