import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Db } from '../../db/pool.ts';
import { startTopology, type Topology } from '../../tools/replicas/topology.ts';
import { startS3Server, type S3Server } from '../../tools/scripts/s3-server.ts';
import { ensureConsoleBuilt } from '../../tools/scripts/build-web.ts';
import { startSimVendor } from '../../tools/sim/index.ts';
import { startMailCatcher, type MailCatcher } from '../../web/mail.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, createTestAccount, INTERNAL_SECRET, sendCut } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { serviceEnv } from '../helpers/processes.ts';
import { cookieFrom, PASSWORD } from '../web/people.ts';

/**
 * The replicated deployment as real processes (tools/replicas/topology.ts): two API processes, two
 * workers and two consoles that share nothing but Postgres, Redis, Temporal and an S3-compatible
 * bucket (versitygw). Every request here goes to a chosen replica by its own port, as a load
 * balancer might send it.
 */
let s3: S3Server;
let sim: Awaited<ReturnType<typeof startSimVendor>>;
let mail: MailCatcher;
let topology: Topology;
let db: Db;
const BUCKET = 'lenstack-replicas';
const AUTH_SECRET = 'replicas-auth-secret-0123456789abcdef0123';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  s3 = await startS3Server();
  const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
  await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  client.destroy();
  sim = await startSimVendor({ port: 0 });
  mail = await startMailCatcher();
  await ensureConsoleBuilt();
  const config = testConfig();
  db = createPool(config.DATABASE_URL);
  topology = await startTopology({
    apis: 2,
    workers: 2,
    consoles: 2,
    logDir: mkdtempSync(join(tmpdir(), 'lenstack-replicas-')),
    // What every service process of the tests joins (test/helpers/processes.ts), on the shared bucket.
    env: serviceEnv(config, {
      INTERNAL_SECRET,
      AUTH_SECRET,
      SIM_VENDOR_URL: sim.url,
      SMTP_URL: mail.url,
      PAYMENTS_GATEWAY: 'recording',
      BLOB_STORE: 's3',
      S3_BUCKET: BUCKET,
      S3_ENDPOINT: s3.endpoint,
      S3_FORCE_PATH_STYLE: 'true',
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    }),
  });
}, 300_000);

afterAll(async () => {
  await topology?.stop();
  await db?.end();
  await mail?.close();
  await sim?.close();
  await s3?.stop();
}, 60_000);

const api = (i: number) => topology.apis[i]!.url;
const post = (base: string, key: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body: JSON.stringify(body) });
const internal = (base: string, method: string, path: string, body?: unknown) =>
  fetch(`${base}${path}`, {
    method,
    headers: { 'x-internal-secret': INTERNAL_SECRET, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('replicas as processes (2 API, 2 workers, 2 consoles)', () => {
  it('answers any request on any API replica: the photo analysed on one is known, billed once, to the other', async () => {
    const user = await createTestAccount(db, { community: 50 });
    const bytes = photoBytes('Canon_40D.jpg');
    const first = await post(api(0), user.liveKey, '/v1/analyze', { imageBase64: bytes.toString('base64'), modules: ['dating', 'describe'] });
    expect(first.status, await first.clone().text()).toBe(200);
    expect(((await first.json()) as { usage: { creditsCharged: number } }).usage.creditsCharged).toBe(2);
    // The same photo on the other replica: in the registry both read, so nothing is billed again.
    const again = await post(api(1), user.liveKey, '/v1/analyze', { imageBase64: bytes.toString('base64'), modules: ['dating', 'describe'] });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { usage: { creditsCharged: number } }).usage.creditsCharged).toBe(0);
    const lookup = await fetch(`${api(1)}/v2/lookup?sha256=${sha(bytes)}`, { headers: bearer(user.liveKey) });
    expect(lookup.status).toBe(200);
    expect(((await lookup.json()) as { results: Record<string, { matchType: string }> }).results[sha(bytes)]).toMatchObject({ matchType: 'exact' });
    // The bytes are in the shared bucket, once.
    const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: BUCKET }));
    client.destroy();
    expect((listed.Contents ?? []).filter((o) => o.Key!.includes(sha(bytes)))).toHaveLength(1);
    // Both replicas read one balance.
    const usage = await Promise.all([0, 1].map(async (i) => (await (await fetch(`${api(i)}/v1/usage`, { headers: bearer(user.liveKey) })).json()) as { community: { balance: number }; reserved: number }));
    expect(usage.map((u) => [u.community.balance, u.reserved])).toEqual([[48, 0], [48, 0]]);
  });

  it('finishes on the second API replica, by tus-js-client, an upload whose PATCH was cut in the middle on the first; either analyses it', async () => {
    const user = await createTestAccount(db, { community: 10 });
    const bytes = photoBytes('Nikon_D70.jpg');
    const created = await fetch(`${api(0)}/v1/uploads`, { method: 'POST', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-length': String(bytes.length) } });
    expect(created.status).toBe(201);
    const path = new URL(created.headers.get('location')!, api(0)).pathname;
    // A PATCH to the first process that announces every byte, sends half of them, and drops.
    await sendCut(`${api(0)}${path}`, { method: 'PATCH', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0', 'upload-offset': '0' }, bytes, cutAt: Math.floor(bytes.length / 2) });
    // The other process knows the upload (its row and the bucket's object): HEAD answers its offset.
    const known = await fetch(`${api(1)}${path}`, { method: 'HEAD', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0' } });
    expect(known.status).toBe(200);
    expect(Number(known.headers.get('upload-offset'))).toBeLessThanOrEqual(Math.floor(bytes.length / 2));
    // The official client resumes it on the other process, from the offset the bucket holds.
    const patchedFrom: number[] = [];
    await new Promise<void>((resolve, reject) => {
      const up = new tus.Upload(bytes, {
        endpoint: `${api(1)}/v1/uploads`,
        uploadUrl: `${api(1)}${path}`,
        headers: bearer(user.liveKey),
        retryDelays: [200, 500, 1000, 2000],
        onBeforeRequest: (req) => {
          if (req.getMethod() === 'PATCH') patchedFrom.push(Number(req.getHeader('Upload-Offset')));
        },
        onSuccess: () => resolve(),
        onError: reject,
      });
      up.start();
    });
    // The same upload went on (no second one was created) from the offset the bucket held. The S3
    // store writes in parts of megabytes and a cut PATCH may keep none of the part it was gathering:
    // for this 14 kB photo that offset is 0 here; the directory store keeps every byte that arrived
    // (test/uploads/tus.test.ts).
    expect(patchedFrom.length).toBeGreaterThanOrEqual(1);
    expect(patchedFrom[0]).toBe(Number(known.headers.get('upload-offset')));
    expect((await db.query('SELECT count(*)::int AS n FROM uploads WHERE user_id = $1', [user.userId])).rows[0].n).toBe(1);
    const head = await fetch(`${api(0)}${path}`, { method: 'HEAD', headers: { ...bearer(user.liveKey), 'tus-resumable': '1.0.0' } });
    expect(head.headers.get('upload-offset')).toBe(String(bytes.length));
    const uploadId = path.split('/').pop()!;
    const analysed = await post(api(0), user.liveKey, '/v1/analyze', { images: [{ uploadId }], modules: ['dating'], options: { includeFingerprint: true } });
    expect(analysed.status, await analysed.clone().text()).toBe(200);
    expect(JSON.stringify(await analysed.json())).toContain(sha(bytes));
  });

  it('shares rate limits: a request on one replica counts against the same budget on the other', async () => {
    const user = await createTestAccount(db);
    const remaining = async (i: number) => {
      const res = await fetch(`${api(i)}/v1/usage`, { headers: bearer(user.liveKey) });
      expect(res.status).toBe(200);
      return { left: Number(res.headers.get('ratelimit-remaining')), reset: Number(res.headers.get('ratelimit-reset')) };
    };
    // Three calls inside one window (a window that ends mid-way would refill the budget: start
    // over, at most twice: three windows cannot all end within three calls).
    for (let attempt = 1; ; attempt++) {
      const a = await remaining(0);
      const b = await remaining(1);
      const c = await remaining(0);
      if (a.reset < 3 && attempt < 3) continue;
      expect([b.left, c.left]).toEqual([a.left - 1, a.left - 2]);
      break;
    }
  });

  it('refuses a revoked key on every API replica, whichever replica revoked it', async () => {
    const user = await createTestAccount(db);
    const issued = await internal(api(0), 'POST', `/v1/internal/accounts/${user.userId}/keys`, { kind: 'live' });
    expect(issued.status).toBe(201);
    const key = (await issued.json()) as { id: string; key: string };
    // Both replicas have seen the key work, so each holds it in its key cache.
    for (const i of [0, 1]) expect((await fetch(`${api(i)}/v1/usage`, { headers: bearer(key.key) })).status).toBe(200);
    const revokedAt = performance.now();
    const revoked = await internal(api(1), 'DELETE', `/v1/internal/accounts/${user.userId}/keys/${key.id}`);
    expect(revoked.status).toBe(200);
    // The eviction was heard by both API processes and both consoles (every subscriber of the bus).
    expect(((await revoked.json()) as { apiProcessesNotified: number }).apiProcessesNotified).toBe(4);
    expect((await fetch(`${api(1)}/v1/usage`, { headers: bearer(key.key) })).status).toBe(401);
    let refusedAfterMs = 0;
    await expect
      .poll(async () => {
        const status = (await fetch(`${api(0)}/v1/usage`, { headers: bearer(key.key) })).status;
        refusedAfterMs = performance.now() - revokedAt;
        return status;
      }, { timeout: 30_000, interval: 20 })
      .toBe(401);
    console.log(`revocation reached the other API replica after at most ${refusedAfterMs.toFixed(0)} ms`);
  });

  it('keeps a console session made on one console replica valid on the other', async () => {
    const email = `replica-${Date.now()}@example.test`;
    const [c1, c2] = topology.consoles.map((c) => c.url) as [string, string];
    const signUp = await fetch(`${c1}/api/v1/auth/sign-up/email`, { method: 'POST', headers: { origin: c1, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Ada', email, password: PASSWORD }) });
    expect(signUp.status).toBe(200);
    const confirm = await mail.waitFor((m) => m.to.includes(email) && m.subject === 'Confirm your e-mail address for Lenstack');
    // The link names the replica that sent it; the other replica follows it just as well.
    const link = new URL(/https?:\/\/\S+/.exec(confirm.text)![0]);
    expect(link.origin).toBe(c1);
    expect((await fetch(`${c2}${link.pathname}${link.search}`, { redirect: 'manual' })).status).toBeLessThan(400);
    const signIn = await fetch(`${c2}/api/v1/auth/sign-in/email`, { method: 'POST', headers: { origin: c2, 'content-type': 'application/json' }, body: JSON.stringify({ email, password: PASSWORD }) });
    expect(signIn.status).toBe(200);
    const cookie = cookieFrom(signIn);
    const sessions = await Promise.all([c1, c2].map(async (c) => (await (await fetch(`${c}/api/v1/session`, { headers: { cookie } })).json()) as { workspaces: Array<{ id: string }> }));
    expect(sessions[0]!.workspaces).toHaveLength(1);
    expect(sessions[0]).toEqual(sessions[1]);
  });

  it('finishes a batch when a worker is SIGKILLed in the middle of it, each photo billed once', async () => {
    const user = await createTestAccount(db, { community: 20 });
    const names = ['Canon_40D.jpg', 'Nikon_D70.jpg', 'Pentax_K10D.jpg', 'gps-DSCN0010.jpg', 'gps-DSCN0012.jpg', 'gps-DSCN0021.jpg'];
    const submitted = await post(api(0), user.liveKey, '/v1/batches', { items: names.map((n) => ({ base64: photoBytes(n).toString('base64'), name: n })), modules: ['dating'] });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    const { id } = (await submitted.json()) as { id: string };
    const batch = async () => (await (await fetch(`${api(1)}/v1/batches/${id}`, { headers: bearer(user.liveKey) })).json()) as { status: string; counts: { done: number; total: number }; creditsCharged: number };
    // Killed once the batch has begun and before it ends: work in flight on that worker is lost to it.
    await expect.poll(async () => (await batch()).counts.done, { timeout: 120_000, interval: 100 }).toBeGreaterThan(0);
    const exit = await topology.restart(topology.workers[0]!, 'SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    await expect.poll(async () => (await batch()).status, { timeout: 240_000, interval: 250 }).toBe('completed');
    const done = await batch();
    expect(done.counts).toMatchObject({ done: names.length, total: names.length });
    // One credit a photo, once, whichever worker ran it; no hold left open.
    expect(done.creditsCharged).toBe(names.length);
    const usage = (await (await fetch(`${api(0)}/v1/usage`, { headers: bearer(user.liveKey) })).json()) as { community: { balance: number }; reserved: number };
    expect([usage.community.balance, usage.reserved]).toEqual([20 - names.length, 0]);
  }, 300_000);
});
