import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileErrors, validate } from '@readme/openapi-parser';
import { ERROR_STATUS } from '../../core/errors.ts';
import { LENS_NAMES, LENSES, SELECTABLE_LENSES, getLens, outputFields } from '../../lenses/index.ts';
import { STACKS } from '../../lenses/stacks.ts';
import { buildTestApp, expectEnvelope, INTERNAL_SECRET, type TestApp } from '../helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => t.close());

describe('meta endpoints (no auth)', () => {
  it('GET /v1/health is the health record', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/health' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ status: 'ok', service: 'lenstack', version: 'v1' });
    expect(Date.parse(body.timestamp)).not.toBeNaN();
  });

  it('GET /v1/openapi.json is OpenAPI 3.1, version 1.1.0, valid under a third-party validator, and covers the endpoints', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.1.0');
    const result = await validate(structuredClone(doc));
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    for (const [path, method] of [
      ['/v1/health', 'get'],
      ['/v1/modules', 'get'],
      ['/v1/usage', 'get'],
      ['/v1/llms.txt', 'get'],
      ['/v1/analyze', 'post'],
      ['/v2/analyze', 'post'],
    ] as const) {
      expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
    }
    // Internal-secret operations are not in the public document (they have their own).
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/v1/internal'))).toEqual([]);
    expect(Object.keys(doc.components.securitySchemes)).toEqual(['bearer']);
    // userId is read only with the internal secret: the key form of GET /v1/usage has tier and the shared x-request-id.
    expect(doc.paths['/v1/usage'].get.parameters).toEqual([expect.objectContaining({ name: 'tier' }), { $ref: '#/components/parameters/RequestId' }]);
    // Request validation and the document come from the same zod schema.
    const analyzeBody = doc.paths['/v1/analyze'].post.requestBody.content['application/json'].schema;
    const ref = String(analyzeBody.$ref).split('/').pop()!;
    expect(doc.components.schemas[ref].properties.imageBase64.maxLength).toBe(67_000_000);
    // The error envelope's code is the enum of every code the API answers with (core/errors.ts),
    // one named component that a failed batch item's code names too.
    expect(doc.components.schemas.ErrorEnvelope.properties.error.properties.code).toEqual({ $ref: '#/components/schemas/ErrorCode' });
    expect(doc.components.schemas.ErrorCode.enum).toEqual(Object.keys(ERROR_STATUS));
    expect(doc.components.schemas.BatchItem.properties.error.type).toEqual(['object', 'null']);
    expect(doc.components.schemas.BatchItem.properties.error.properties.code).toEqual({ $ref: '#/components/schemas/ErrorCode' });
    // Lens and stack names are named enums, from the lens modules and stacks.ts, in analyze and batches alike.
    expect(doc.components.schemas.LensName.enum).toEqual(SELECTABLE_LENSES);
    expect(doc.components.schemas.AnyLensName.enum).toEqual(LENS_NAMES);
    expect(doc.components.schemas.StackName.enum).toEqual(STACKS.map((st) => st.name));
    for (const body of [doc.components.schemas[ref].properties, doc.components.schemas.BatchRequest.properties]) {
      expect(body.modules.items).toEqual({ $ref: '#/components/schemas/LensName' });
      expect(body.modulesAdd.items).toEqual({ $ref: '#/components/schemas/LensName' });
      expect(body.modulesRemove.items).toEqual({ $ref: '#/components/schemas/AnyLensName' });
      expect(body.preset).toEqual({ $ref: '#/components/schemas/StackName' });
    }
    // References name whole components only (generators such as oapi-codegen refuse deeper ones),
    // no integer may be negative, and every moment is a date-time.
    const text = JSON.stringify(doc);
    expect(text.match(/"\$ref":"#\/components\/schemas\/[^"]*\//g) ?? []).toEqual([]);
    expect(text).not.toContain(String(Number.MIN_SAFE_INTEGER));
    for (const [name, field] of [['Analysis', 'createdAt'], ['Batch', 'createdAt'], ['Batch', 'completedAt'], ['PhotoRecord', 'firstAnalyzedAt'], ['LensRecord', 'producedAt']] as const) {
      expect(doc.components.schemas[name].properties[field].format, `${name}.${field}`).toBe('date-time');
    }
    // Every lens's output is a component, with exactly the lens's fields; output is one of the three shapes.
    for (const lens of LENSES) {
      const name = `${lens.name.split('-').map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}Output`;
      expect(Object.keys(doc.components.schemas[name]?.properties ?? {}), name).toEqual(outputFields(lens));
    }
    const analysis = doc.paths['/v1/analyze'].post.responses['200'].content['application/json'].schema;
    const analysisRef = String(analysis.$ref).split('/').pop()!;
    expect(doc.components.schemas[analysisRef].properties.output.anyOf).toEqual(
      ['PhotoOutput', 'MultiPhotoOutput', 'VehicleReportOutput'].map((c) => ({ $ref: `#/components/schemas/${c}` })),
    );
    // Each field of the merged outputs is a component of its own, which the lens's component names too.
    expect(doc.components.schemas.PhotoOutput.properties.estimatedDate).toEqual({ $ref: '#/components/schemas/DatingEstimatedDate' });
    expect(doc.components.schemas.DatingOutput.properties.estimatedDate).toEqual({ $ref: '#/components/schemas/DatingEstimatedDate' });
    expect(doc.components.schemas.DatingEstimatedDate.properties.year).toBeDefined();
    // A batch item's output: one flat union, null included.
    expect(doc.components.schemas.BatchItem.properties.output.anyOf).toEqual([
      { $ref: '#/components/schemas/PhotoOutput' },
      { $ref: '#/components/schemas/VehicleReportOutput' },
      { type: 'null' },
    ]);
    expect(doc.components.schemas.BatchItem.properties.photos.type).toEqual(['array', 'null']);
    expect(doc.components.schemas.VehicleReportOutput.required).toContain('reportId');
    // A lens component's example is the lens's own fixture.
    expect(doc.components.schemas.DatingOutput.examples).toEqual([getLens('dating').fixture]);
    // The registry record of each lens carries that lens's output type.
    expect(doc.components.schemas.PhotoRecord.properties.lenses.properties.dating.allOf[1].properties.output).toEqual({ $ref: '#/components/schemas/DatingOutput' });
  });

  it('every operation has a unique camelCase operationId, a described tag, x-request-id on every response, and an error envelope by default', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const ids: string[] = [];
    const tags = new Set(doc.tags.map((tag: { name: string; description: string }) => tag.name));
    for (const [path, item] of Object.entries<Record<string, { operationId: string; tags: string[]; responses: Record<string, { headers: Record<string, unknown> }> }>>(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][A-Za-z0-9]+$/);
        ids.push(op.operationId);
        for (const tag of op.tags) expect(tags.has(tag), `${method} ${path} tag ${tag}`).toBe(true);
        for (const [status, response] of Object.entries(op.responses)) {
          expect(response.headers['x-request-id'], `${method} ${path} ${status}`).toEqual({ $ref: '#/components/headers/RequestId' });
        }
        expect(op.responses.default).toMatchObject({ content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } });
      }
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(['analyzeV1', 'analyzeV2', 'lookupByImage', 'lookupByFingerprint', 'enrichPhoto', 'createBatch', 'getBatch', 'getCatalog', 'getUsage', 'getHealth']));
    const analyze = doc.paths['/v1/analyze'].post.responses;
    expect(analyze['402'].headers['Cache-Control']).toEqual({ $ref: '#/components/headers/CacheControl' });
    expect(doc.components.headers.CacheControl.schema.const).toBe('no-store, private');
    expect(analyze['429'].headers['Retry-After']).toEqual({ $ref: '#/components/headers/RetryAfter' });
    expect(analyze['200'].headers['RateLimit-Remaining']).toEqual({ $ref: '#/components/headers/RateLimitRemaining' });
    expect(analyze['409'].description).toContain('REQUEST_ID_CONFLICT');
    // A client can send its own x-request-id (the idempotency key of analyze) on every operation.
    expect(doc.paths['/v1/analyze'].post.parameters).toContainEqual({ $ref: '#/components/parameters/RequestId' });
    expect(doc.components.parameters.RequestId).toMatchObject({ name: 'x-request-id', in: 'header', required: false });
    // A template generated clients fill in, then the relative form the docs page's "Try it out" uses.
    expect(doc.servers.map((s: { url: string }) => s.url)).toEqual(['{origin}', '/']);
    expect(doc.servers[0].variables.origin.default).toBe('http://localhost:8080');
  });

  it('the internal document is served only with the internal secret, and holds exactly the internal-secret operations', async () => {
    const refused = await t.app.inject({ method: 'GET', url: '/v1/internal/openapi.json' });
    expect(refused.statusCode).toBe(401);
    expect(expectEnvelope(refused.json()).code).toBe('AUTH_FAILED');
    const res = await t.app.inject({ method: 'GET', url: '/v1/internal/openapi.json', headers: { 'x-internal-secret': INTERNAL_SECRET } });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    const result = await validate(structuredClone(doc));
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(Object.keys(doc.components.securitySchemes)).toEqual(['internalSecret']);
    expect(doc.paths['/v1/internal/evict'].post.operationId).toBe('evictKeys');
    expect(doc.paths['/v1/internal/accounts/{userId}/keys'].post.operationId).toBe('issueApiKey');
    // GET /v1/usage in its secret form: userId is required there.
    expect(doc.paths['/v1/usage'].get.security).toEqual([{ internalSecret: [] }]);
    expect(doc.paths['/v1/usage'].get.parameters.find((p: { name: string }) => p.name === 'userId').required).toBe(true);
    for (const item of Object.values<Record<string, { security: unknown }>>(doc.paths)) {
      for (const op of Object.values(item)) expect(op.security).toEqual([{ internalSecret: [] }]);
    }
    expect(doc.paths['/v1/analyze']).toBeUndefined();
  });

  it('GET /v1/docs shows the public document', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/docs/json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.paths['/v1/analyze'].post.operationId).toBe('analyzeV1');
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/v1/internal'))).toEqual([]);
  });

  it('GET /v1/docs serves an interactive HTML page', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.body.toLowerCase()).toContain('swagger');
  });

  it('GET /v1/llms.txt is plain text generated from the catalog', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/llms.txt' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    for (const lens of LENSES) expect(res.body).toContain(`- ${lens.name}`);
    for (const stack of ['full-analysis', 'quick-scan', 'vehicle-condition', 'automobile', 'claims', 'property', 'ecommerce', 'memorial']) {
      expect(res.body).toContain(`- ${stack}:`);
    }
    expect(res.body).toContain('/.well-known/lenstack.json');
    expect(res.body).toContain('- DELETE /v1/photos/{sha256} — erase a photo');
    expect(res.body).toContain('svc_test_public');
  });

  it('the discovery index lists service, docs, openapi, health and the operations', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/.well-known/lenstack.json' });
    expect(res.statusCode).toBe(200);
    const d = res.json();
    expect(d).toMatchObject({ name: 'Lenstack', docs: '/v1/docs', openapi: '/v1/openapi.json', health: '/v1/health' });
    expect(Object.keys(d.operations)).toEqual(expect.arrayContaining(['analyze', 'lookup', 'enrich', 'modules', 'usage', 'docs', 'llmsTxt']));
  });
});
