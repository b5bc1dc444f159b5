import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateOpenApiDocuments, OPENAPI_FILES, REPO_ROOT, serializeDocument } from '../../tools/scripts/openapi.ts';

describe('openapi/lenstack.json and openapi/internal.json', () => {
  it('are what the code generates (run `npm run openapi` and commit the result)', async () => {
    const docs = await generateOpenApiDocuments();
    for (const which of ['public', 'internal'] as const) {
      const committed = await readFile(join(REPO_ROOT, OPENAPI_FILES[which]), 'utf8');
      expect(committed === serializeDocument(docs[which]), `${OPENAPI_FILES[which]} differs from what the code generates: run \`npm run openapi\` and commit the result`).toBe(true);
    }
  });

  it('split the operations by credential: Bearer and none in the public one, x-internal-secret in the internal one', async () => {
    const docs = await generateOpenApiDocuments();
    const schemesOf = (doc: typeof docs.public) =>
      new Set(Object.values(doc.paths).flatMap((item) => Object.values(item).flatMap((op) => (op.security ?? []).flatMap((req) => Object.keys(req)))));
    expect([...schemesOf(docs.public)]).toEqual(['bearer']);
    expect([...schemesOf(docs.internal)]).toEqual(['internalSecret']);
    expect(docs.public.paths['/v1/analyze']?.post?.operationId).toBe('analyzeV1');
    expect(docs.internal.paths['/v1/internal/evict']?.post?.operationId).toBe('evictKeys');
    // A generated client gets no `{}` for a success: every 2xx names its content.
    for (const [path, item] of Object.entries(docs.public.paths)) {
      for (const [method, op] of Object.entries(item)) {
        // The tus upload protocol answers in headers (a tus client speaks it, not the generated one).
        if ((op as Record<string, unknown>)['x-tus-protocol']) continue;
        const ok = Object.entries(op.responses ?? {}).filter(([status]) => status.startsWith('2'));
        expect(ok.length, `${method} ${path}`).toBeGreaterThan(0);
        for (const [, response] of ok) expect(Object.keys(response.content ?? {}).length, `${method} ${path}`).toBeGreaterThan(0);
      }
    }
  });
});
