import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueKey } from '../../auth/repository.ts';
import { ExportSlots, prepareBatchExport } from '../../batches/export.ts';
import { grant } from '../../credits/ledger.ts';
import { recordKeyCreator } from '../../accounts/members.ts';
import { createTeamWorkspace, ensurePersonalWorkspace } from '../../accounts/workspaces.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { DISTINCT_PHOTOS, photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Load an attacker could put on an API process through batches (issue 21, item 7), over real HTTP
 * against the real pipeline: event streams that never end, a per-account stream cap multiplied by
 * free workspaces, and exports without bound. The worker starts only for the last part, so the
 * batches of the first parts stay `running` as long as the test needs them to.
 */
let p: Pipeline;
let base: string;
beforeAll(async () => {
  p = await startPipeline({ worker: false, config: { EXPORTS_PER_ACCOUNT: 2, EXPORTS_IN_FLIGHT: 3 } });
  base = await p.app.listen({ port: 0, host: '127.0.0.1' });
}, 120_000);
// The API waits for a response this file leaves unread (an export or a stream it abandons) before it
// closes: about a minute, which the default hook timeout no longer covered.
afterAll(async () => p?.close(), 180_000);

const json = { 'content-type': 'application/json' };
async function submit(key: string, photos: string[]): Promise<string> {
  const res = await fetch(`${base}/v1/batches`, { method: 'POST', headers: { ...bearer(key), ...json }, body: JSON.stringify({ items: photos.map((f) => ({ base64: photoBase64(f), name: f })), modules: ['dating'] }) });
  expect(res.status, await res.clone().text()).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

interface Stream {
  status: number;
  response: Response;
  abort(): void;
}
async function openStream(key: string, batchId: string): Promise<Stream> {
  const ac = new AbortController();
  const response = await fetch(`${base}/v1/batches/${batchId}/events`, { headers: bearer(key), signal: ac.signal });
  return { status: response.status, response, abort: () => ac.abort() };
}

/** Every event of a stream until the server ends it. */
async function eventsUntilEnd(response: Response): Promise<Array<{ event: string; data: Record<string, unknown> }>> {
  const text = await response.text();
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('event:'))
    .map((block) => {
      const [event, data] = block.split('\n') as [string, string];
      return { event: event.slice('event: '.length), data: JSON.parse(data.slice('data: '.length)) as Record<string, unknown> };
    });
}

async function person() {
  const id = `cu_${randomBytes(8).toString('hex')}`;
  const email = `p-${randomBytes(6).toString('hex')}@example.test`;
  await p.db.query('INSERT INTO console_users (id, name, email, email_verified, updated_at) VALUES ($1, $2, $3, true, now())', [id, 'P', email]);
  return { id, email };
}

/** A live key as the console makes it: it records the person who made it. */
async function consoleKey(account: string, personId: string): Promise<string> {
  const issued = await issueKey(p.db, account, 'live');
  await recordKeyCreator(p.db, issued.keyId, personId);
  return issued.key;
}

describe('event streams: a cap per person over every workspace they own', () => {
  it('one person with two free workspaces cannot hold more streams than one account may', async () => {
    const someone = await person();
    const own = await ensurePersonalWorkspace(p.db, someone);
    const team = (await createTeamWorkspace(p.db, someone, 'Second')).id;
    await grant(p.db, { accountId: team, pool: 'purchased', amount: 10, idempotencyKey: `load-${team}`, kind: 'purchase' });
    const keys = [await consoleKey(own, someone.id), await consoleKey(team, someone.id)];
    const batches = [await submit(keys[0]!, [DISTINCT_PHOTOS[0]!]), await submit(keys[1]!, [DISTINCT_PHOTOS[1]!])];

    const open: Stream[] = [];
    for (let i = 0; i < 5; i++) open.push(await openStream(keys[0]!, batches[0]!));
    expect(open.map((s) => s.status)).toEqual([200, 200, 200, 200, 200]);
    // The account's cap holds on its own.
    const sixth = await openStream(keys[0]!, batches[0]!);
    expect(sixth.status).toBe(429);

    // The same person through their second, free workspace: refused as well.
    const other = await openStream(keys[1]!, batches[1]!);
    expect(other.status).toBe(429);
    expect(other.response.headers.get('retry-after')).toBe('5');
    const envelope = expectEnvelope(await other.response.json());
    expect(envelope).toMatchObject({ code: 'RATE_LIMITED', retryable: true, retryAfterSeconds: 5 });
    expect(envelope.message).toContain('person');

    // A stream closed gives its place back.
    open.pop()!.abort();
    await expect.poll(async () => {
      const s = await openStream(keys[1]!, batches[1]!);
      if (s.status === 200) open.push(s);
      else await s.response.body?.cancel();
      return s.status;
    }, { timeout: 20_000, interval: 200 }).toBe(200);

    // Another person's account is not touched by any of it.
    const stranger = await createTestAccount(p.db, { community: 10 });
    const strangers = await openStream(stranger.liveKey, await submit(stranger.liveKey, [DISTINCT_PHOTOS[2]!]));
    expect(strangers.status).toBe(200);
    for (const s of [...open, strangers]) s.abort();
  }, 60_000);
});

describe('event streams: a co-owner does not use up the other owner\'s share', () => {
  it('five streams by one owner of a shared team leave the other owner their own streams elsewhere', async () => {
    const [a, b] = [await person(), await person()];
    const team = (await createTeamWorkspace(p.db, a, 'Shared')).id;
    await p.db.query(`INSERT INTO workspace_members (workspace_id, console_user_id, role) VALUES ($1, $2, 'owner')`, [team, b.id]);
    await grant(p.db, { accountId: team, pool: 'purchased', amount: 10, idempotencyKey: `load-${team}`, kind: 'purchase' });
    const bOwn = await ensurePersonalWorkspace(p.db, b);
    const aKey = await consoleKey(team, a.id);
    const bKey = await consoleKey(bOwn, b.id);
    const teamBatch = await submit(aKey, [DISTINCT_PHOTOS[3]!]);
    const bBatch = await submit(bKey, [DISTINCT_PHOTOS[4]!]);

    const open: Stream[] = [];
    for (let i = 0; i < 5; i++) open.push(await openStream(aKey, teamBatch));
    expect(open.map((s) => s.status)).toEqual([200, 200, 200, 200, 200]);
    // B, co-owner of the team, follows a batch in their own workspace with their own key.
    const bStream = await openStream(bKey, bBatch);
    expect(bStream.status).toBe(200);
    open.push(bStream);
    // The shared team's own cap still holds.
    const sixth = await openStream(aKey, teamBatch);
    expect(sixth.status).toBe(429);
    expect(expectEnvelope(await sixth.response.json()).message).toContain('per account');
    for (const s of open) s.abort();
  }, 60_000);
});

describe('exports: bounded per account and per process, with Retry-After', () => {
  it('beyond 2 at once for an account: 429; beyond 3 on the process: 503; the slots come back when they finish', async () => {
    const a = await createTestAccount(p.db, { community: 10 });
    const b = await createTestAccount(p.db, { community: 10 });
    const c = await createTestAccount(p.db, { community: 10 });
    const batchA = await submit(a.liveKey, DISTINCT_PHOTOS.slice(0, 3));
    const batchB = await submit(b.liveKey, DISTINCT_PHOTOS.slice(3, 5));
    const batchC = await submit(c.liveKey, DISTINCT_PHOTOS.slice(5, 6));
    const exportOf = (key: string, id: string) => fetch(`${base}/v1/batches/${id}/export?format=csv`, { headers: bearer(key) });

    // Hold every export at its first read of the batch's rows: a transaction locks the table.
    const lock = new pg.Client({ connectionString: p.config.DATABASE_URL });
    await lock.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE batch_items IN ACCESS EXCLUSIVE MODE');
      // Exports waiting on that lock. pg_stat_activity is read once per transaction unless cleared.
      const waiting = async () => {
        await lock.query('SELECT pg_stat_clear_snapshot()');
        return Number((await lock.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM batch_items i LEFT JOIN%'`)).rows[0].n);
      };

      const held = [await exportOf(a.liveKey, batchA), await exportOf(a.liveKey, batchA)];
      expect(held.map((r) => r.status)).toEqual([200, 200]);
      await expect.poll(waiting, { timeout: 20_000, interval: 100 }).toBe(2);
      const third = await exportOf(a.liveKey, batchA);
      expect(third.status).toBe(429);
      expect(third.headers.get('retry-after')).toBe('5');
      expect(expectEnvelope(await third.json())).toMatchObject({ code: 'RATE_LIMITED', retryable: true, retryAfterSeconds: 5 });

      held.push(await exportOf(b.liveKey, batchB));
      expect(held[2]!.status).toBe(200);
      await expect.poll(waiting, { timeout: 20_000, interval: 100 }).toBe(3);
      // The process writes 3 exports: anyone else is told to come back.
      for (const [key, id] of [[b.liveKey, batchB], [c.liveKey, batchC]] as const) {
        const full = await exportOf(key, id);
        expect(full.status).toBe(503);
        expect(full.headers.get('retry-after')).toBe('5');
        expect(expectEnvelope(await full.json())).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true, retryAfterSeconds: 5 });
      }
      // Nothing waits on the database beyond the admitted three.
      expect(await waiting()).toBe(3);

      await lock.query('COMMIT');
      const bodies = await Promise.all(held.map(async (r) => parse(Buffer.from(await r.arrayBuffer()), { bom: true }) as string[][]));
      expect(bodies.map((rows) => rows.length)).toEqual([4, 4, 3]);
    } finally {
      await lock.end();
    }
    // Finished exports gave their slots back.
    for (const [key, id] of [[a.liveKey, batchA], [a.liveKey, batchA], [c.liveKey, batchC]] as const) {
      const again = await exportOf(key, id);
      expect(again.status).toBe(200);
      await again.arrayBuffer();
    }
  }, 60_000);
});

describe('exports: a preparation that fails holds no slot', () => {
  it('an export whose columns cannot be worked out throws, and leaves every slot free', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const batchId = await submit(user.liveKey, [DISTINCT_PHOTOS[6]!]);
    const slots = new ExportSlots({ EXPORTS_PER_ACCOUNT: 1, EXPORTS_IN_FLIGHT: 1 });
    // A batch whose stored lenses name no lens this build knows: working out its columns throws.
    await p.db.query(`UPDATE batches SET spec = jsonb_set(spec, '{lenses}', '["no-such-lens"]') WHERE id = $1`, [batchId]);
    // Each attempt fails on the columns (a TypeError), never on a slot held by the one before.
    for (let i = 0; i < 3; i++) await expect(prepareBatchExport(p.db, user.userId, batchId, 'csv', slots)).rejects.toBeInstanceOf(TypeError);
    // Had a failed preparation kept its slot, this take would be 429 (account) or 503 (process).
    const release = slots.take(user.userId);
    release();
  });
});

describe('event streams end when the batch stops running', () => {
  it('a pause ends the stream with an end event saying why; so does a cancel, and a stream opened on a paused batch', async () => {
    await p.startWorker();
    // Slow vendors: the batch is still running when it is paused.
    p.sim.setBehaviour('all', { latencyMs: 2_000 });
    try {
      const user = await createTestAccount(p.db, { community: 100 });
      const id = await submit(user.liveKey, DISTINCT_PHOTOS.slice(0, 10));
      const stream = await openStream(user.liveKey, id);
      expect(stream.status).toBe(200);
      const events = eventsUntilEnd(stream.response);
      expect((await fetch(`${base}/v1/batches/${id}/pause`, { method: 'POST', headers: bearer(user.liveKey) })).status).toBe(202);
      const seen = await events;
      expect(seen.at(-1)).toEqual({ event: 'end', data: { reason: 'paused', pauseReason: 'requested' } });
      expect(seen.at(-2)).toMatchObject({ event: 'batch', data: { status: 'paused' } });
      expect(((seen.at(-2)!.data.counts as { pending: number }).pending)).toBeGreaterThan(0);

      // Opened on the paused batch: its state, then the end at once.
      expect(await eventsUntilEnd((await openStream(user.liveKey, id)).response)).toEqual([
        { event: 'batch', data: expect.objectContaining({ status: 'paused' }) },
        { event: 'end', data: { reason: 'paused', pauseReason: 'requested' } },
      ]);

      expect((await fetch(`${base}/v1/batches/${id}/resume`, { method: 'POST', headers: bearer(user.liveKey) })).status).toBe(202);
      // The workflow takes the signal and marks the batch running again.
      await expect.poll(async () => ((await (await fetch(`${base}/v1/batches/${id}`, { headers: bearer(user.liveKey) })).json()) as { status: string }).status, { timeout: 30_000, interval: 100 }).toBe('running');
      const resumed = await openStream(user.liveKey, id);
      const more = eventsUntilEnd(resumed.response);
      expect((await fetch(`${base}/v1/batches/${id}/cancel`, { method: 'POST', headers: bearer(user.liveKey) })).status).toBe(202);
      expect((await more).at(-1)).toMatchObject({ event: 'end', data: { reason: 'cancelled' } });
    } finally {
      p.sim.setBehaviour('all', { latencyMs: 0 });
    }
  }, 120_000);
});
