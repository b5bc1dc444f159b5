import { z } from 'zod';
import { LENSES, outputFields } from './index.ts';
import { STACKS } from './stacks.ts';

/** Wire schemas of GET /v1/modules (docs/contract.md "Resources"). */
export const columnSchema = z.object({
  label: z.string(),
  jsonPath: z.string().describe('Dotted path into the analysis result; a numeric segment indexes an array, `*` maps over it'),
  format: z.enum(['string', 'number', 'date', 'percentage', 'tags', 'hex']).optional(),
});

export const catalogEntrySchema = z.object({
  name: z.string().describe('Lens identifier used in modules, modulesAdd, modulesRemove'),
  description: z.string(),
  category: z.string(),
  outputFields: z.array(z.string()).describe('Fields the lens adds to `output`'),
  billable: z.boolean(),
  defaultColumns: z.array(columnSchema),
  internal: z.literal(true).optional().describe('Present only for lenses reachable solely through the stack of the same name'),
});

export const stackEntrySchema = z.object({
  name: z.string(),
  description: z.string(),
  modules: z.array(z.string()),
});

export const catalogResponseSchema = z.object({
  modules: z.array(catalogEntrySchema),
  presets: z.array(stackEntrySchema),
});

export type CatalogEntry = z.infer<typeof catalogEntrySchema>;
export type StackEntry = z.infer<typeof stackEntrySchema>;
export type CatalogResponse = z.infer<typeof catalogResponseSchema>;

/** The GET /v1/modules payload, derived entirely from the lens modules and stacks.ts. */
export function buildCatalog(): CatalogResponse {
  const modules = LENSES.map((lens): CatalogEntry => ({
    name: lens.name,
    description: lens.description,
    category: lens.category,
    outputFields: outputFields(lens),
    billable: lens.billable,
    defaultColumns: lens.defaultColumns.map((c) => ({ ...c })),
    ...(lens.internal ? { internal: true as const } : {}),
  }));
  const presets = STACKS.map((s): StackEntry => ({ name: s.name, description: s.description, modules: [...s.lenses] }));
  return { modules, presets };
}
