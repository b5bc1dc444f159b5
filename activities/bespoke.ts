import { saveBespokeSchema } from '../bespoke/repository.ts';
import type { BespokeSchema } from '../bespoke/schema.ts';
import type { ActivityDeps } from './deps.ts';

export function bespokeActivities(deps: ActivityDeps) {
  return {
    /** Every schema an extraction uses is saved, so the caller can reuse it by id. */
    async saveBespokeSchema(input: { userId: string; schema: Record<string, unknown>; prompt: string | null }): Promise<string> {
      return saveBespokeSchema(deps.db, { accountId: input.userId, schema: input.schema as unknown as BespokeSchema, prompt: input.prompt });
    },
  };
}
