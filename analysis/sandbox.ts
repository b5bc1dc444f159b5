import { VENDOR_NAMES } from '../core/vendor-names.ts';
import type { Principal } from '../auth/authenticate.ts';
import { toStrictJsonSchema, type BespokeSchema } from '../bespoke/schema.ts';
import { sandboxOutput } from '../lenses/fixtures.ts';
import { generate } from '../samples/generate.ts';
import type { Analysis } from './contract.ts';
import type { AnalysisRequest, ExtractRequest } from './request.ts';
import { buildAnalysis } from './response.ts';
import type { AnalyzeDeps } from './deps.ts';

const ANON_CREATED_AT = '2026-01-01T00:00:00.000Z';

/** svc_test_ keys: fixtures, instantly, no workflow, no vendor, nothing billed or stored. */
export function sandboxAnalysis(deps: AnalyzeDeps, principal: Principal, request: AnalysisRequest, requestId: string, startedAt: number): Analysis {
  const { lenses, extract, multi } = request;
  const outputSchema = request.resolved.outputSchema;
  // The public anonymous key always gets the same fixed payload, whatever it asks for.
  const effective = principal.anonymous ? ['moderation', 'describe', 'dating'] : lenses;
  const fixture = sandboxOutput(effective as never) as Record<string, unknown>;
  if (extract && !principal.anonymous) fixture.bespoke = { schemaId: null, data: sandboxBespoke(extract) };
  // The vehicle report is one report over all photos, not one output per photo, with one `photos`
  // entry per submitted photo like a live report.
  if (outputSchema === 'vehicle' && Array.isArray(fixture.photos) && fixture.photos.length > 0) {
    const template = fixture.photos as Array<Record<string, unknown>>;
    fixture.photos = request.inputs.map((_, index) => ({ ...template[index % template.length], index }));
  }
  const output = multi && !principal.anonymous && outputSchema !== 'vehicle'
    ? { images: Array.from({ length: request.inputs.length }, (_, index) => ({ index, sha256: null, cacheHit: false, creditsCharged: 0, ...fixture })) }
    : fixture;
  return buildAnalysis({
    ...(principal.anonymous ? { id: 'ana_sandbox_anonymous', createdAt: ANON_CREATED_AT } : {}),
    output,
    outputSchema: principal.anonymous ? 'photo' : outputSchema,
    modulesUsed: effective,
    inputTokens: 0,
    outputTokens: 0,
    creditsCharged: 0,
    warnings: [...(principal.anonymous ? [] : request.warnings), 'sandbox: fixture data from a svc_test_ key; no AI call was made and nothing was billed'],
    origin: { provider: 'sandbox', model: 'sandbox-fixtures', vendor: deps.config.VENDOR_ORDER[0] ?? VENDOR_NAMES[0] },
    promptHash: null,
    cacheHit: false,
    requestId,
    startedAt: principal.anonymous ? { processingTimeMs: 0 } : startedAt,
  });
}

/** Sandbox extraction: schema-shaped fixture data, no AI call (a prompt gets a one-field fixture). */
function sandboxBespoke(extract: ExtractRequest): unknown {
  if (!extract.schema) return { answer: 'sandbox fixture: bespoke extraction runs with a live key' };
  return generate(toStrictJsonSchema(extract.schema as BespokeSchema) as never, { seedKey: 'sandbox' });
}
