import type { paths } from './generated/lenstack.ts';

type Route = { [P in keyof paths]: { [M in 'get' | 'post' | 'delete']: paths[P][M] extends NonNullable<unknown> ? readonly [Uppercase<M>, P] : never }['get' | 'post' | 'delete'] }[keyof paths];

/**
 * Which method of the client calls which operation of the document. The type only admits
 * operations the generated `paths` has; test/clients/generated.test.ts checks that every public
 * operation of openapi/lenstack.json is here (a new endpoint needs a method).
 */
export const OPERATIONS = {
  health: ['GET', '/v1/health'],
  llmsTxt: ['GET', '/v1/llms.txt'],
  discovery: ['GET', '/.well-known/lenstack.json'],
  catalog: ['GET', '/v1/modules'],
  usage: ['GET', '/v1/usage'],
  analyze: ['POST', '/v1/analyze'],
  analyzeV2: ['POST', '/v2/analyze'],
  lookup: ['POST', '/v2/lookup'],
  lookupByFingerprint: ['GET', '/v2/lookup'],
  enrich: ['POST', '/v2/enrich'],
  deletePhoto: ['DELETE', '/v1/photos/{sha256}'],
  'batches.create': ['POST', '/v1/batches'],
  'batches.get': ['GET', '/v1/batches/{batchId}'],
  'batches.items': ['GET', '/v1/batches/{batchId}/items'],
  'batches.pause': ['POST', '/v1/batches/{batchId}/pause'],
  'batches.resume': ['POST', '/v1/batches/{batchId}/resume'],
  'batches.cancel': ['POST', '/v1/batches/{batchId}/cancel'],
  'batches.retryItem': ['POST', '/v1/batches/{batchId}/items/{index}/retry'],
  'batches.export': ['GET', '/v1/batches/{batchId}/export'],
  'batches.events': ['GET', '/v1/batches/{batchId}/events'],
} as const satisfies Record<string, Route>;
