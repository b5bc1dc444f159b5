import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../../credits/ledger.ts';
import { expectEnvelope } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startConsoleOverHttp, type ConsoleOverHttp } from '../web/console-http.ts';

/**
 * Whose quota a console upload counts against (docs/decisions.md, "A console fleet in a workspace
 * that paid"), over HTTP against the console's real server. Before: every console upload counted
 * against its person's UPLOAD_QUOTA_BYTES (2 GiB by default), so a fleet of 200 vehicles × 25
 * phone photos (about 20 GB) was refused with 413 at about 500 photos, in a workspace that had
 * paid for the fleet and held 100 GiB of account quota. Now the person's quota holds only in
 * workspaces that never bought credits, where it keeps one person from multiplying free storage
 * over many free workspaces; a workspace that paid holds a fleet up to its account quota.
 */
const MiB = 1024 * 1024;
// Small stand-ins for the defaults, so a few declared uploads reach each limit: the person's
// quota (2 GiB by default) and the account quota of a workspace that paid (100 GiB).
const PERSON_QUOTA = 100 * MiB;
const ACCOUNT_QUOTA = 300 * MiB;
const SIZE = 40 * MiB;

let p: Pipeline;
let site: ConsoleOverHttp;

beforeAll(async () => {
  // No worker: nothing here runs; only uploads are declared.
  p = await startPipeline({ worker: false, config: { ACCOUNT_UPLOAD_QUOTA_BYTES: ACCOUNT_QUOTA } });
  site = await startConsoleOverHttp(p, { batches: true, config: { UPLOAD_QUOTA_BYTES: PERSON_QUOTA } });
}, 120_000);
afterAll(async () => {
  await site?.close();
  await p?.close();
});

/** A tus creation of `size` declared bytes in `workspaceId` through the console's door. */
const declare = (who: { cookie: string }, workspaceId: string, size = SIZE) =>
  fetch(`${site.url}/api/v1/uploads`, {
    method: 'POST',
    headers: {
      cookie: who.cookie,
      origin: site.url,
      'tus-resumable': '1.0.0',
      'upload-length': String(size),
      'upload-metadata': `workspace ${Buffer.from(workspaceId).toString('base64')},filename ${Buffer.from('car.jpg').toString('base64')}`,
    },
  });

const teamWorkspace = async (who: { cookie: string }, name: string): Promise<string> => {
  const r = await fetch(`${site.url}/api/v1/workspaces`, {
    method: 'POST',
    headers: { cookie: who.cookie, origin: site.url, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  expect(r.status, await r.clone().text()).toBe(201);
  return ((await r.json()) as { id: string }).id;
};

const heldBy = async (workspaceId: string) =>
  Number((await p.db.query<{ n: string }>('SELECT count(*)::text AS n FROM uploads WHERE user_id = $1', [workspaceId])).rows[0]!.n);

describe('the console upload quota', () => {
  it('a person holds at most their quota over all the workspaces that never paid: a second free workspace adds no room', async () => {
    const who = await site.signIn(`free-${randomBytes(5).toString('hex')}@example.test`);
    expect((await declare(who, who.workspaceId)).status).toBe(201);
    expect((await declare(who, who.workspaceId)).status).toBe(201);
    const over = await declare(who, who.workspaceId);
    expect(over.status).toBe(413);
    const err = expectEnvelope(await over.json());
    expect(err.code).toBe('PAYLOAD_TOO_LARGE');
    expect(err.message).toContain('100 MiB');
    expect(err.message).toContain('start a batch with the finished ones first');
    // The attack the person's quota is for: a free team workspace of the same person gets no room of its own.
    const other = await teamWorkspace(who, 'Second free one');
    expect((await declare(who, other)).status).toBe(413);
    expect(await heldBy(other)).toBe(0);
    expect(await heldBy(who.workspaceId)).toBe(2);
  }, 60_000);

  it('a workspace that bought credits takes a fleet past the person quota, up to its account quota; its uploads leave the person room elsewhere', async () => {
    const who = await site.signIn(`fleet-${randomBytes(5).toString('hex')}@example.test`);
    const fleet = await teamWorkspace(who, 'Dealer group');
    // Before it pays, the person quota holds there as anywhere.
    expect((await declare(who, fleet)).status).toBe(201);
    expect((await declare(who, fleet)).status).toBe(201);
    expect((await declare(who, fleet)).status).toBe(413);

    await grant(p.db, { accountId: fleet, pool: 'purchased', amount: 1000, idempotencyKey: `pack-${fleet}`, kind: 'purchase' });
    // 300 MiB of account quota: 7 uploads of 40 MiB in all (2 held already), past the person's 100 MiB.
    for (let k = 0; k < 5; k++) expect((await declare(who, fleet)).status, `upload ${k + 3}`).toBe(201);
    const full = await declare(who, fleet);
    expect(full.status).toBe(413);
    expect(expectEnvelope(await full.json()).message).toContain("this account's upload quota (300 MiB");
    expect(await heldBy(fleet)).toBe(7);

    // The paid workspace's 280 MiB are not the person's free room: their personal workspace still takes its 100 MiB.
    expect((await declare(who, who.workspaceId)).status).toBe(201);
    expect((await declare(who, who.workspaceId)).status).toBe(201);
    expect((await declare(who, who.workspaceId)).status).toBe(413);
  }, 60_000);
});
