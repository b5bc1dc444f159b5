import { existsSync } from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

/** Whether `staticDir` holds a built front end (web/ui/dist with its index.html). */
export function hasBuiltUi(staticDir: string | undefined): staticDir is string {
  return staticDir !== undefined && existsSync(path.join(staticDir, 'index.html'));
}

/** Hashed asset names: each file is registered at startup and cached; index.html is not cached (web/plugins/errors.ts serves it). */
export async function registerBuiltUi(app: FastifyInstance, staticDir: string): Promise<void> {
  await app.register(fastifyStatic, { root: staticDir, wildcard: false, index: false, maxAge: '1h' });
}
