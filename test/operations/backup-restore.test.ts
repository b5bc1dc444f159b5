import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.ts';
import { KeyCache } from '../../auth/cache.ts';
import { getBalance, grant } from '../../credits/ledger.ts';
import { dropDatabase } from '../../db/migrate.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { backup, restore } from '../../tools/scripts/backup.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, createTestAccount, type TestAccount } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { noRateLimits, unreachableTemporal } from '../helpers/deps.ts';

const run = promisify(execFile);

/**
 * docs/backup.md, followed step by step: a populated stack (keys, balances, registry entries, lens
 * records, blobs) is backed up with `npm run backup -- create`, restored with `npm run backup --
 * restore` into an empty Postgres database and an empty blob directory, and an API over the
 * restored copy finds everything again; `npm run admin -- ledger check` passes on it.
 */
let p: Pipeline;
let restoredUrl: string;
let restoredDb: Db | undefined;
beforeAll(async () => {
  p = await startPipeline();
  const url = new URL(p.config.DATABASE_URL);
  url.pathname = `/lenstack_restore_${randomBytes(4).toString('hex')}`;
  restoredUrl = url.toString();
}, 120_000);
afterAll(async () => {
  await restoredDb?.end();
  await dropDatabase(restoredUrl).catch(() => {});
  await p?.close();
});

async function noiseJpeg(): Promise<Buffer> {
  return sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
}
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** The scripts as docs/backup.md runs them: a separate process reading its environment. */
const script = (args: string[], env: Record<string, string>) =>
  run(process.execPath, ['--import', 'tsx', ...args], { env: { ...process.env, ...env } });

describe('backup and restore (docs/backup.md)', () => {
  it('restores keys, balances, registry entries, lens records and blobs into an empty database and blob directory', async () => {
    const users: TestAccount[] = [await createTestAccount(p.db, { community: 20 }), await createTestAccount(p.db, { community: 5 })];
    await grant(p.db, { accountId: users[0]!.userId, pool: 'purchased', amount: 1000, idempotencyKey: 'pack-like' });
    const photos = [await noiseJpeg(), await noiseJpeg(), await noiseJpeg()];
    for (const [u, img, modules] of [[users[0]!, photos[0]!, ['dating', 'describe']], [users[0]!, photos[1]!, ['dating']], [users[1]!, photos[2]!, ['location']]] as const) {
      const res = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(u.liveKey), payload: { imageBase64: img.toString('base64'), modules } });
      expect(res.statusCode, res.body).toBe(200);
    }
    const lookups = async (app: typeof p.app) =>
      Promise.all(photos.map(async (img, i) => (await app.inject({ method: 'GET', url: `/v2/lookup?sha256=${sha(img)}`, headers: bearer(users[i < 2 ? 0 : 1]!.liveKey) })).json().results[sha(img)]));
    const usages = async (app: typeof p.app) => Promise.all(users.map(async (u) => (await app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(u.liveKey) })).json()));
    const before = { lookups: await lookups(p.app), usages: await usages(p.app), balances: await Promise.all(users.map((u) => getBalance(p.db, u.userId))) };
    expect(before.lookups.map((l) => l.matchType)).toEqual(['exact', 'exact', 'exact']);
    expect(Object.keys(before.lookups[0].photo.lenses).sort()).toEqual(['dating', 'describe', 'moderation']);

    // 1. Back up: the database, then the blobs.
    const dir = path.join(await mkdtemp(path.join(tmpdir(), 'lenstack-backup-')), 'b');
    const env = { DATABASE_URL: p.config.DATABASE_URL, BLOB_STORE: 'fs', BLOB_DIR: p.config.BLOB_DIR, LOG_LEVEL: 'silent' };
    let t = performance.now();
    const created = JSON.parse((await script(['tools/scripts/backup.ts', 'create', '--out', dir], env)).stdout);
    const backupSeconds = (performance.now() - t) / 1000;
    expect(created.blobs).toBeGreaterThanOrEqual(3);
    expect(JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8'))).toEqual(created);

    // 2. Restore into an empty database and an empty blob directory.
    const blobDir = await mkdtemp(path.join(tmpdir(), 'lenstack-restored-blobs-'));
    const restoreEnv = { DATABASE_URL: restoredUrl, BLOB_STORE: 'fs', BLOB_DIR: blobDir, LOG_LEVEL: 'silent' };
    t = performance.now();
    const restored = JSON.parse((await script(['tools/scripts/backup.ts', 'restore', '--from', dir], restoreEnv)).stdout);
    const restoreSeconds = (performance.now() - t) / 1000;
    // A figure, not a bound (docs/backup.md): the whole test database of this run, every blob of this file.
    console.log(`[backup] ${created.blobs} blobs, ${created.blobBytes} bytes; create ${backupSeconds.toFixed(1)} s, restore ${restoreSeconds.toFixed(1)} s (each a tsx process)`);
    expect(restored.blobs).toBe(created.blobs);
    // A second restore over it is refused: a restore never merges into live data.
    await expect(restore(testConfig({ DATABASE_URL: restoredUrl, BLOB_DIR: blobDir }), dir)).rejects.toThrow(/empty database/);
    await expect(backup(p.config, dir)).rejects.toThrow(/not empty/);

    // 3. An API over the restored copy finds everything: the same keys authenticate, the same
    //    balances, the same registry entries with the same lens records, the same bytes.
    const config = testConfig({ DATABASE_URL: restoredUrl, BLOB_DIR: blobDir });
    restoredDb = createPool(restoredUrl, { max: 4 });
    const blobs = new FsBlobStore(blobDir);
    const app = await buildApp({ config, db: restoredDb, keyCache: new KeyCache(), blobs, fetchPolicy: PUBLIC_INTERNET, temporal: unreachableTemporal(), rateLimiter: noRateLimits, metrics: createApiMetrics() });
    try {
      expect(await lookups(app)).toEqual(before.lookups);
      expect(await usages(app)).toEqual(before.usages);
      expect(await Promise.all(users.map((u) => getBalance(restoredDb!, u.userId)))).toEqual(before.balances);
      for (const img of photos) expect(Buffer.compare(await blobs.get(sha(img)), img)).toBe(0);
      // Lookup by image on the restored copy: the photo is recognised from its bytes.
      const byImage = await app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(users[1]!.liveKey), payload: { images_base64: [photos[2]!.toString('base64')] } });
      expect(byImage.json().results[sha(photos[2]!)].matchType).toBe('exact');
      // A revoked key stays revoked; an unknown key stays unknown.
      expect((await app.inject({ method: 'GET', url: '/v1/usage', headers: bearer('svc_live_' + 'x'.repeat(40)) })).statusCode).toBe(401);
    } finally {
      await app.close();
    }

    // 4. The ledger check passes on the restored copy (npm run admin -- ledger check).
    const check = await script(['tools/scripts/admin.ts', 'ledger', 'check'], { DATABASE_URL: restoredUrl, LOG_LEVEL: 'silent' });
    const report = JSON.parse(check.stdout);
    expect(report.ok).toBe(true);
    expect(report.usersChecked).toBeGreaterThanOrEqual(2);
  }, 240_000);
});
