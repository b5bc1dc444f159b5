import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Db } from '../../db/pool.ts';
import type { MetadataTool, TagValues } from '../../enrich/exiftool.ts';
import { openImage } from '../../images/open.ts';
import { persistAnalysis } from '../../registry/photos.ts';

export const sha256Of = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** SHA-256 of the decoded pixels (no orientation, no colour conversion): equal means untouched. */
export async function pixelHash(bytes: Buffer): Promise<string> {
  const { data, info } = await (await openImage(bytes)).raw().toBuffer({ resolveWithObject: true });
  return createHash('sha256').update(`${info.width}x${info.height}x${info.channels}:`).update(data).digest('hex');
}

/** Put lens records for these bytes straight into a user's registry, as an analysis would. */
export async function seedRegistry(
  db: Db,
  accountId: string,
  bytes: Buffer,
  outputs: Record<string, Record<string, unknown>>,
  versions: Record<string, string> = {},
): Promise<string> {
  const sha256 = sha256Of(bytes);
  const run = `seed-${randomBytes(6).toString('hex')}`;
  await persistAnalysis(db, {
    workflowId: run,
    requestId: run,
    accountId,
    refresh: false,
    images: [
      {
        sha256,
        pHash: '0123456789abcdef',
        dHash: 'fedcba9876543210',
        outputs,
        versions: Object.fromEntries(Object.keys(outputs).map((l) => [l, versions[l] ?? '1.0.0'])),
        billed: [],
        coRunHash: 'seed',
        provider: 'seed',
        vendor: 'openai',
        model: 'seed',
      },
    ],
  });
  return sha256;
}

/** Read a file's tags with our module (`Group1:Tag` keys). */
export async function readBack(tool: MetadataTool, bytes: Buffer, ext: string): Promise<TagValues> {
  const dir = await mkdtemp(join(tmpdir(), 'lenstack-enrich-test-'));
  try {
    const file = join(dir, `read.${ext}`);
    await writeFile(file, bytes);
    return await tool.read(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Tags of one family (`XMP-`, `IPTC:`, `IFD0:`/`ExifIFD:`/`GPS:`), without values. */
export const keysOf = (tags: TagValues, prefix: RegExp) => Object.keys(tags).filter((k) => prefix.test(k)).sort();

export async function ledgerOf(db: Db, accountId: string): Promise<Array<{ kind: string; reservation_id: string | null; charged: number; reserved: number }>> {
  const r = await db.query(
    'SELECT kind, reservation_id, charged_delta::int AS charged, reserved_delta::int AS reserved FROM credit_ledger WHERE user_id = $1 ORDER BY id',
    [accountId],
  );
  return r.rows;
}
