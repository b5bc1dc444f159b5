/**
 * The OpenAPI documents as files: the public one (openapi/lenstack.json, what clients are
 * generated from) and the internal one (openapi/internal.json). Both are made by the app itself,
 * from the routes' zod schemas, with no service running.
 *
 *   npm run openapi             # writes both files
 *   npm run openapi -- --check  # exits 1 when a committed file differs from what the code makes
 */
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { buildApp } from '../../api/app.ts';
import type { AppDeps } from '../../api/deps.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from '../../worker/address.ts';
import { openApiDocuments, type OpenApiDocument } from '../../api/openapi.ts';
import { KeyCache } from '../../auth/cache.ts';
import { configSchema } from '../../core/config.ts';
import { createPool } from '../../db/pool.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { isMain } from './is-main.ts';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Where each document is committed, relative to the repository root. */
export const OPENAPI_FILES = { public: 'openapi/lenstack.json', internal: 'openapi/internal.json' } as const;

/**
 * The app's Temporal client, rate limiter and metrics, for documenting only: a client connects on
 * its first call and a limiter counts on a request's, and documenting makes neither.
 */
function offline(): Pick<AppDeps, 'temporal' | 'rateLimiter' | 'metrics'> {
  return {
    temporal: new Client({ connection: Connection.lazy({ address: DEFAULT_TEMPORAL_ADDRESS }) }),
    rateLimiter: {
      ready: true,
      hit: () => Promise.reject(new Error('documenting the API makes no request')),
      close: async () => {},
    },
    metrics: createApiMetrics(),
  };
}

/** The documents the code makes. Defaults only (no environment): the files must not depend on who ran it. */
export async function generateOpenApiDocuments(): Promise<{ public: OpenApiDocument; internal: OpenApiDocument }> {
  const config = configSchema.parse({ LOG_LEVEL: 'silent' });
  // A pool connects on its first query, which documenting never makes.
  const db = createPool(config.DATABASE_URL, { max: 1 });
  const app = await buildApp({ config, db, keyCache: new KeyCache(), blobs: new FsBlobStore(config.BLOB_DIR), fetchPolicy: PUBLIC_INTERNET, logger: false, ...offline() });
  try {
    await app.ready();
    return structuredClone(openApiDocuments(app));
  } finally {
    await app.close();
    await db.end();
  }
}

/** The committed form: two-space JSON and a final newline, so diffs read line by line. */
export const serializeDocument = (doc: OpenApiDocument): string => `${JSON.stringify(doc, null, 2)}\n`;

/** The files that differ from what the code makes (empty: all current). */
export async function staleOpenApiFiles(root = REPO_ROOT): Promise<string[]> {
  const docs = await generateOpenApiDocuments();
  const stale: string[] = [];
  for (const which of ['public', 'internal'] as const) {
    const committed = await readFile(join(root, OPENAPI_FILES[which]), 'utf8').catch(() => null);
    if (committed !== serializeDocument(docs[which])) stale.push(OPENAPI_FILES[which]);
  }
  return stale;
}

async function main(args: string[]): Promise<number> {
  if (args.includes('--check')) {
    const stale = await staleOpenApiFiles();
    if (stale.length === 0) {
      console.log(`${Object.values(OPENAPI_FILES).join(' and ')} are current`);
      return 0;
    }
    console.error(`${stale.join(' and ')} differ from what the code generates: run \`npm run openapi\` and commit the result`);
    return 1;
  }
  const docs = await generateOpenApiDocuments();
  for (const which of ['public', 'internal'] as const) {
    const file = join(REPO_ROOT, OPENAPI_FILES[which]);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, serializeDocument(docs[which]));
    console.log(`wrote ${OPENAPI_FILES[which]} (${Object.keys(docs[which].paths).length} paths)`);
  }
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
