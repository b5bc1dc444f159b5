import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { OPERATIONS } from '@lenstack/client';
import { GENERATED_PATH, generateTypes, OPENAPI_PATH } from '../../clients/typescript/scripts/generate.ts';

type Doc = { paths: Record<string, Record<string, { security?: Array<Record<string, unknown>> }>> };

/** Operations a key holder calls: unauthenticated or Bearer; internal-secret-only ones are server-to-server (docs/contract.md, "Authentication"). */
function publicOperations(doc: Doc): string[] {
  const out: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
      if (schemes.length > 0 && !schemes.includes('bearer')) continue;
      // The tus upload protocol is spoken by a tus client (tus-js-client), not wrapped by this one.
      if ((op as Record<string, unknown>)['x-tus-protocol']) continue;
      out.push(`${method.toUpperCase()} ${path}`);
    }
  }
  return out.sort();
}

describe('the generated client', () => {
  it('has types generated from the committed openapi/lenstack.json (run `npm run client:generate` when this fails)', async () => {
    const committed = await readFile(GENERATED_PATH, 'utf8');
    expect(committed === (await generateTypes()), 'clients/typescript/src/generated/lenstack.ts is stale: run npm run client:generate').toBe(true);
  });

  it('has a method for every public operation of the document, and none for operations it lacks', async () => {
    const doc = JSON.parse(await readFile(OPENAPI_PATH, 'utf8')) as Doc;
    const wrapped = Object.values(OPERATIONS).map(([method, path]) => `${method} ${path}`).sort();
    expect(wrapped).toEqual(publicOperations(doc));
    // The document this branch was cut from: 19 public operations, the internal account routes left out.
    expect(wrapped).toContain('GET /v1/batches/{batchId}/events');
    expect(wrapped).not.toContain('POST /v1/internal/evict');
  });
});
