import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { promisify } from 'node:util';
import { loadConfig, type Config } from '../../core/config.ts';
import { createDatabaseIfMissing } from '../../db/migrate.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { FsBlobStore, type BlobStore } from '../../images/blobstore.ts';
import { isMain } from './is-main.ts';

const run = promisify(execFile);

/**
 * A backup of Lenstack (docs/backup.md): the database as one pg_dump archive (custom format:
 * compressed, restorable table by table) and a copy of every blob, whatever the store (a
 * directory or an S3 bucket), into `<dir>/blobs` in the blob directory's layout. The database is
 * dumped first: a blob is immutable and only ever deleted when nothing references it, so every
 * blob the dump names is still there when the copy reaches it, unless it was erased in between
 * (then the restored registry names bytes the copy lacks, as after an erasure: docs/backup.md).
 */
export interface BackupManifest {
  createdAt: string;
  pgDumpVersion: string;
  database: string;
  blobs: number;
  blobBytes: number;
}

export async function backup(config: Config, dir: string, opts: { blobs?: BlobStore } = {}): Promise<BackupManifest> {
  await mkdir(dir, { recursive: true });
  if ((await readdir(dir)).length) throw new Error(`backup: ${dir} is not empty; back up into a new directory`);
  const createdAt = new Date().toISOString();
  const dump = path.join(dir, 'lenstack.dump');
  // --format=custom: one compressed file pg_restore reads; --no-owner/--no-acl: restorable as any role.
  await run('pg_dump', ['--format=custom', '--no-owner', '--no-acl', `--file=${dump}`, `--dbname=${config.DATABASE_URL}`]);
  const source = opts.blobs ?? blobStoreFromConfig(config);
  const target = new FsBlobStore(path.join(dir, 'blobs'));
  let blobs = 0;
  let blobBytes = 0;
  for await (const blob of source.list()) {
    // put() checks the bytes hash to their name: a damaged blob fails the backup, not the restore.
    await target.put(blob.sha256, await source.get(blob.sha256));
    blobs += 1;
    blobBytes += blob.bytes;
  }
  const manifest: BackupManifest = {
    createdAt,
    pgDumpVersion: (await run('pg_dump', ['--version'])).stdout.trim(),
    database: new URL(config.DATABASE_URL).pathname.slice(1),
    blobs,
    blobBytes,
  };
  await writeFile(path.join(dir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/**
 * Restore a backup into an empty database (created when missing) and an empty blob store. Refuses
 * a database that has tables or a store that has blobs: a restore never merges into live data.
 */
export async function restore(config: Config, dir: string, opts: { blobs?: BlobStore } = {}): Promise<{ blobs: number }> {
  const dump = path.join(dir, 'lenstack.dump');
  await stat(dump);
  await createDatabaseIfMissing(config.DATABASE_URL);
  const { stdout } = await run('psql', ['-At', `--dbname=${config.DATABASE_URL}`, '-c', `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`]);
  if (Number(stdout.trim()) > 0) throw new Error('restore: the target database has tables; restore into an empty database');
  const target = opts.blobs ?? blobStoreFromConfig(config);
  for await (const _ of target.list()) throw new Error('restore: the target blob store holds blobs; restore into an empty one');
  await run('pg_restore', ['--no-owner', '--no-acl', '--exit-on-error', '--single-transaction', `--dbname=${config.DATABASE_URL}`, dump]);
  const source = new FsBlobStore(path.join(dir, 'blobs'));
  let blobs = 0;
  for await (const blob of source.list()) {
    const bytes = await source.get(blob.sha256);
    if (createHash('sha256').update(bytes).digest('hex') !== blob.sha256) throw new Error(`restore: blob ${blob.sha256} is damaged in the backup`);
    await target.put(blob.sha256, bytes);
    blobs += 1;
  }
  return { blobs };
}

const USAGE = `Usage: npm run backup -- create --out <dir>     (DATABASE_URL, BLOB_STORE/BLOB_DIR or S3_* as the service reads them)
       npm run backup -- restore --from <dir>  (into an empty DATABASE_URL and an empty blob store)`;

if (isMain(import.meta.url)) {
  const { positionals, values } = parseArgs({ allowPositionals: true, options: { out: { type: 'string' }, from: { type: 'string' } } });
  const config = loadConfig(process.env);
  try {
    if (positionals[0] === 'create' && values.out) console.log(JSON.stringify(await backup(config, values.out)));
    else if (positionals[0] === 'restore' && values.from) console.log(JSON.stringify(await restore(config, values.from)));
    else {
      console.error(USAGE);
      process.exitCode = 2;
    }
  } catch (err) {
    console.error(`backup: ${(err as Error).message}`);
    process.exitCode = 1;
  }
}
