import { z } from 'zod';
import { validationFailed } from '../../core/errors.ts';

/** A workspace in the path (`…/workspaces/{workspaceId}/…`). */
export const workspaceParams = z.object({ workspaceId: z.string().min(1).max(100) });

/**
 * A request part checked against its schema, or 400 VALIDATION_FAILED naming the part (`what`:
 * `path`, `query`, `body`) and each problem by its place (`(root)` for the whole part).
 */
export function parse<T extends z.ZodType>(what: string, schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) throw validationFailed(`${what}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/** `parse('body', …)`. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  return parse('body', schema, body);
}
