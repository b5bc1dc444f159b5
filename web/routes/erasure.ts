import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { eraseConsolePerson } from '../../accounts/console-people.ts';
import { eraseWorkspace, type EraseDeps } from '../../accounts/erase.ts';
import { removeMember, type MemberDeps } from '../../accounts/members.ts';
import { membershipsOf, requireMember, retentionDays as storedRetention, setRetentionDays, workspaceKind } from '../../accounts/workspaces.ts';
import { AppError, validationFailed } from '../../core/errors.ts';
import type { WebContext } from '../deps.ts';
import { parse, workspaceParams as params } from '../plugins/validation.ts';
const deleteWorkspaceBody = z.strictObject({ confirm: z.string().max(200) });
const deleteAccountBody = z.strictObject({ confirm: z.string().max(400) });
/** Days the original bytes are kept (docs/privacy.md "Retention"); null: kept while the registry holds the photo. */
const settingsBody = z.strictObject({ retentionDays: z.number().int().min(1).max(3650).nullable() });

export type ErasureDeps = Omit<EraseDeps, 'keyCache' | 'evictionBus'> & MemberDeps;

/**
 * The console's erasure and retention routes (docs/privacy.md):
 * - `GET|PATCH …/workspaces/{id}/settings` `{"retentionDays": n | null}`: how long original bytes are kept (owners change it);
 * - `DELETE …/workspaces/{id}` `{"confirm": "<its name>"}`: an owner erases a team workspace;
 * - `DELETE /api/v1/account` `{"confirm": "<your address>"}`: a person erases their console account
 *   and personal workspace; refused while they are the only owner of a team workspace.
 */
export function erasureRoutes(ctx: WebContext): FastifyPluginAsync {
  const { signedIn } = ctx;
  // Erasure needs the blob store and Temporal, which come with the console's batch pipeline.
  const pipeline = ctx.deps.batches?.pipeline;
  const deps: ErasureDeps | null = pipeline
    ? {
        db: ctx.deps.db,
        keyCache: ctx.deps.keyCache,
        ...(ctx.deps.evictionBus ? { evictionBus: ctx.deps.evictionBus } : {}),
        blobs: pipeline.blobs,
        temporal: pipeline.temporal,
      }
    : null;
  return async (app) => {
    const base = '/api/v1/workspaces/:workspaceId';
    const needDeps = (): ErasureDeps => {
      if (!deps) throw new AppError('SERVICE_UNAVAILABLE', 'Erasure needs the blob store, which this console server was started without');
      return deps;
    };

    app.get(`${base}/settings`, async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', params, request.params);
      await requireMember(needDeps().db, person.id, workspaceId);
      return { retentionDays: await storedRetention(needDeps().db, workspaceId) };
    });

    app.patch(`${base}/settings`, async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', params, request.params);
      const { retentionDays } = parse('body', settingsBody, request.body);
      await requireMember(needDeps().db, person.id, workspaceId, ['owner']);
      await setRetentionDays(needDeps().db, workspaceId, retentionDays);
      return { retentionDays };
    });

    app.delete(base, async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', params, request.params);
      const { confirm } = parse('body', deleteWorkspaceBody, request.body);
      const d = needDeps();
      await requireMember(d.db, person.id, workspaceId, ['owner']);
      const ws = (await workspaceKind(d.db, workspaceId))!;
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
      const memberships = await membershipsOf(d.db, person.id);
      // A team workspace whose only owner this person is would be left without anyone who can manage
      // or erase it: refused until it is handed over or deleted (docs/decisions.md).
      const sole = memberships.filter((m) => m.kind === 'team' && m.role === 'owner' && m.owners === 1);
      if (sole.length) {
        throw new AppError('FORBIDDEN', `You are the only owner of ${sole.map((m) => `“${m.name}”`).join(', ')}: hand ${sole.length === 1 ? 'it' : 'them'} over to another member or delete ${sole.length === 1 ? 'it' : 'them'} first; nothing was deleted`);
      }
      const erased: string[] = [];
      for (const m of memberships) {
        if (m.kind === 'personal' && m.role === 'owner') {
          if (await eraseWorkspace(d, m.workspaceId)) erased.push(m.workspaceId);
        } else {
          // Leaving, as from the members page: the keys this person made there are revoked.
          await removeMember(d, { workspaceId: m.workspaceId, actorId: person.id, personId: person.id, keys: 'revoke' });
        }
      }
      // The person: sessions, sign-in methods, pending invitations they sent and memberships go by cascade
      // (the keys they made in team workspaces were revoked above, as on leaving).
      await eraseConsolePerson(d.db, person);
      request.log.info({ workspacesErased: erased.length }, 'console account erased');
      return { deleted: true, workspacesErased: erased };
    });
  };
}
