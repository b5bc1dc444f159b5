import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { MAX_OWNED_TEAM_WORKSPACES } from '../../accounts/workspaces.ts';
import { bearer, expectEnvelope } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startConsoleOverHttp, type ConsoleOverHttp } from '../web/console-http.ts';

/**
 * The console's side of free batches (issue 21, item 2), over HTTP against the console's real
 * server and the real API. Before: a person made as many team workspaces as they liked, each an
 * account of its own at 0 credits, and the console's batch route took a batch in for a workspace
 * that could not pay for a single photo. Now: a person owns at most MAX_OWNED_TEAM_WORKSPACES team
 * workspaces (403 past it), and the console's batch route refuses a 0-credit batch with the same
 * 402 as the API, before it reads an upload.
 */
let p: Pipeline;
let site: ConsoleOverHttp;
let url: string;

beforeAll(async () => {
  // No worker: nothing here may run.
  p = await startPipeline({ worker: false });
  site = await startConsoleOverHttp(p, { batches: true });
  url = site.url;
}, 120_000);
afterAll(async () => {
  await site?.close();
  await p?.close();
});

/** A person signed in by a mailed link (their address confirmed by it): their session cookie. */
const signIn = async (email: string): Promise<string> => (await site.signIn(email)).cookie;
const post = (cookie: string, route: string, body: unknown) =>
  fetch(`${url}${route}`, { method: 'POST', headers: { cookie, origin: url, 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('team workspaces per person', () => {
  it(`a person owns at most ${MAX_OWNED_TEAM_WORKSPACES} team workspaces: the next is 403 and makes nothing`, async () => {
    const cookie = await signIn(`many-${randomBytes(5).toString('hex')}@example.test`);
    const made: string[] = [];
    for (let k = 0; k < MAX_OWNED_TEAM_WORKSPACES; k++) {
      const r = await post(cookie, '/api/v1/workspaces', { name: `Team ${k}` });
      expect(r.status, await r.clone().text()).toBe(201);
      made.push(((await r.json()) as { id: string }).id);
    }
    const over = await post(cookie, '/api/v1/workspaces', { name: 'One too many' });
    expect(over.status).toBe(403);
    const err = expectEnvelope(await over.json());
    expect(err.code).toBe('FORBIDDEN');
    expect(err.message).toContain(`${MAX_OWNED_TEAM_WORKSPACES} team workspaces`);
    // Ten at once past the cap: none made (the count is taken under the person's lock).
    const burst = await Promise.all(Array.from({ length: 10 }, (_, k) => post(cookie, '/api/v1/workspaces', { name: `Burst ${k}` })));
    expect(burst.map((r) => r.status)).toEqual(Array(10).fill(403));
    const session = (await (await fetch(`${url}/api/v1/session`, { headers: { cookie } })).json()) as { workspaces: Array<{ id: string; name: string; role: string }> };
    // The personal workspace and the ten.
    expect(session.workspaces).toHaveLength(MAX_OWNED_TEAM_WORKSPACES + 1);
    expect(session.workspaces.some((w) => w.name === 'One too many' || w.name.startsWith('Burst'))).toBe(false);
  }, 60_000);

  it('concurrent creations cannot pass the cap either', async () => {
    const cookie = await signIn(`race-${randomBytes(5).toString('hex')}@example.test`);
    const all = await Promise.all(Array.from({ length: MAX_OWNED_TEAM_WORKSPACES + 5 }, (_, k) => post(cookie, '/api/v1/workspaces', { name: `Race ${k}` })));
    expect(all.filter((r) => r.status === 201)).toHaveLength(MAX_OWNED_TEAM_WORKSPACES);
    expect(all.filter((r) => r.status === 403)).toHaveLength(5);
  }, 60_000);
});

describe('a new team workspace (0 credits) cannot take a batch in', () => {
  it('its own live key on POST /v1/batches, and the console’s batch route with a finished upload: 402 before intake; no batch, no photo in the registry, the upload given back', async () => {
    const cookie = await signIn(`team-${randomBytes(5).toString('hex')}@example.test`);
    const team = (await (await post(cookie, '/api/v1/workspaces', { name: 'Free storage' })).json()) as { id: string };
    expect(await getBalance(p.db, team.id)).toMatchObject({ community: 0, purchased: 0 });
    const key = (await (await post(cookie, `/api/v1/workspaces/${team.id}/keys`, { kind: 'live' })).json()) as { key: string };
    const photo = photoBytes('Nikon_D70.jpg');

    const api = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(key.key), payload: { items: [1, 2, 3].map((k) => ({ base64: photo.toString('base64'), name: `p${k}.jpg` })), preset: 'quick-scan' } });
    expect(api.statusCode, api.body).toBe(402);
    expect(expectEnvelope(api.json())).toMatchObject({ code: 'PLAN_LIMIT_EXCEEDED', credits: { total: 0 } });

    // A finished resumable upload into the team workspace, then the console's batch route.
    const tus = { cookie, origin: url, 'tus-resumable': '1.0.0' };
    const created = await fetch(`${url}/api/v1/uploads`, {
      method: 'POST',
      headers: { ...tus, 'upload-length': String(photo.length), 'upload-metadata': `workspace ${Buffer.from(team.id).toString('base64')},filename ${Buffer.from('nikon.jpg').toString('base64')}` },
    });
    expect(created.status).toBe(201);
    const location = new URL(created.headers.get('location')!, url);
    const uploadId = location.pathname.split('/').pop()!;
    const sent = await fetch(location, { method: 'PATCH', headers: { ...tus, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, body: photo });
    expect(sent.status).toBe(204);
    const consoleBatch = await post(cookie, `/api/v1/workspaces/${team.id}/batches`, { preset: 'quick-scan', uploads: [{ id: uploadId, name: 'nikon.jpg' }] });
    expect(consoleBatch.status, await consoleBatch.clone().text()).toBe(402);
    const err = expectEnvelope(await consoleBatch.json());
    expect(err).toMatchObject({ code: 'PLAN_LIMIT_EXCEEDED', credits: { needed: expect.any(Number), total: 0 } });

    // Nothing taken in: no batch, no photo in the registry; the bytes are only the upload's (kept
    // once in the blob store under its hash, as every finished upload), still the person's to use.
    expect((await p.db.query('SELECT 1 FROM batches WHERE user_id = $1', [team.id])).rowCount).toBe(0);
    expect((await p.db.query('SELECT 1 FROM photos WHERE user_id = $1', [team.id])).rowCount).toBe(0);
    const upload = await p.db.query<{ taken_at: Date | null; sha256: string }>('SELECT taken_at, sha256 FROM uploads WHERE id = $1', [uploadId]);
    expect(upload.rows).toEqual([{ taken_at: null, sha256: createHash('sha256').update(photo).digest('hex') }]);
    expect(await getBalance(p.db, team.id)).toMatchObject({ community: 0, purchased: 0, reserved: 0 });
    expect(await checkInvariants(p.db, team.id)).toEqual([{ userId: team.id, ok: true, problems: [] }]);
  }, 60_000);
});
