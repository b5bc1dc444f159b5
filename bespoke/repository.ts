import { randomBytes } from 'node:crypto';
import type { Db } from '../db/pool.ts';
import { bespokeSchemaHash, type BespokeSchema } from './schema.ts';

export const newSchemaId = () => `bsk_${randomBytes(16).toString('hex')}`;

/** Save (or find) an account's schema; the same schema always gets the same id for that account. */
export async function saveBespokeSchema(db: Db, args: { accountId: string; schema: BespokeSchema; prompt?: string | null }): Promise<string> {
  const hash = bespokeSchemaHash(args.schema);
  const r = await db.query<{ id: string }>(
    `INSERT INTO bespoke_schemas (id, user_id, schema, schema_hash, prompt) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (user_id, schema_hash) DO UPDATE SET schema_hash = EXCLUDED.schema_hash
     RETURNING id`,
    [newSchemaId(), args.accountId, args.schema, hash, args.prompt ?? null],
  );
  return r.rows[0]!.id;
}

/** A schema only its owner can use: another account's id reads as not found. */
export async function getBespokeSchema(db: Db, accountId: string, id: string): Promise<BespokeSchema | null> {
  const r = await db.query<{ schema: BespokeSchema }>('SELECT schema FROM bespoke_schemas WHERE id = $1 AND user_id = $2', [id, accountId]);
  return r.rows[0]?.schema ?? null;
}
