import type { Client } from '@temporalio/client';
import type { BaseLogger } from 'pino';
import type { Principal } from '../auth/authenticate.ts';
import type { Config } from '../core/config.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import { mapBounded } from '../core/map-bounded.ts';
import type { ApiMetrics } from '../metrics/api.ts';
import type { Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import { intakeImage } from '../images/intake.ts';
import { fetchPolicy, type FetchImageOptions } from '../images/fetch.ts';
import { sandboxOutput } from '../lenses/fixtures.ts';
import { getBespokeSchema } from '../bespoke/repository.ts';
import { bespokeSchemaInput, checkBespokeSchema, toStrictJsonSchema, type BespokeSchema } from '../bespoke/schema.ts';
import { generate } from '../samples/generate.ts';
import { resolveLenses } from '../lenses/resolve.ts';
import { analysisPersisted, getPhotos, type RegistryPhoto, photoFingerprint, recordCacheHit, deleteUnreferencedBlobs } from '../registry/photos.ts';
import type { AnalyzeBody, Analysis } from './contract.ts';
import { analyzeWorkflow } from '../workflows/analyze.ts';
import { vendorAttemptTimeoutMs } from '../workflows/deadlines.ts';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import type { AnalyzeInput, AnalyzeResult, ImageRef, Vendor } from '../workflows/types.ts';
import { bindRequest, requestFingerprint, storeAnswer, unbindRequest } from './request-binding.ts';
import { vehicleAnalysis } from './vehicle.ts';
import { startAndAwait, WorkflowNotStarted } from './await-workflow.ts';
import { analysisEnvelope, assembleOutput, lensOutput, newAnalysisId, originOf, photoOutput, type PerImage } from './response.ts';

export interface AnalyzeDeps {
  config: Config;
  db: Db;
  blobs: BlobStore;
  /** Absent only in tests of the HTTP layer: sandbox answers and validation still work. */
  temporal?: Client;
  /** Vendors configured in this deployment, in fallback order. */
  vendors: Vendor[];
  /** Vendors answered by the simulator (labelled in meta.provider and warnings). */
  simulated: Vendor[];
  /** Test hook for the image fetcher (e.g. treat a loopback test server as public). */
  fetchOptions?: Partial<FetchImageOptions>;
  /** The request's logger (its lines carry requestId; workflow lines add workflowId). */
  log?: Pick<BaseLogger, 'info' | 'warn' | 'error'>;
  metrics?: ApiMetrics;
  /** Aborted when the API stops waiting on workflows at shutdown (api/drain.ts). */
  abandon?: AbortSignal;
}

const INTAKE_CONCURRENCY = 4;

type ImageInput = { url?: string; base64?: string };

/** SPEC analyze rule 1: exactly one input style; each item must carry an image. */
export function imageInputs(body: AnalyzeBody): { inputs: ImageInput[]; multi: boolean } {
  const single = body.imageUrl !== undefined || body.imageBase64 !== undefined;
  if (single && body.images) throw validationFailed('body: use either imageUrl/imageBase64 or images, not both');
  if (body.imageUrl !== undefined && body.imageBase64 !== undefined) throw validationFailed('body: use either imageUrl or imageBase64, not both');
  if (single) return { inputs: [body.imageUrl !== undefined ? { url: body.imageUrl } : { base64: body.imageBase64! }], multi: false };
  if (!body.images) throw validationFailed('body: an image is required (imageUrl, imageBase64 or images)');
  const inputs = body.images.map((item, i) => {
    // An item may carry both; the bytes we were given win over a fetch.
    if (item.base64 !== undefined) return { base64: item.base64 };
    if (item.url !== undefined) return { url: item.url };
    throw validationFailed(`body.images.${i}: each item needs url or base64`);
  });
  return { inputs, multi: true };
}

export async function analyze(
  deps: AnalyzeDeps,
  principal: Principal,
  body: AnalyzeBody,
  requestId: string,
  startedAt: number,
): Promise<Analysis> {
  if (principal.sandbox) return runAnalysis(deps, principal, body, requestId, startedAt, newProgress());
  const userId = principal.userId!;
  // Checked before the id is bound: a malformed request never takes its x-request-id.
  imageInputs(body);
  const binding = await bindRequest<Analysis>(deps.db, { userId, requestId, hash: requestFingerprint(body) });
  if (binding.kind === 'answered') return binding.response;
  const progress = newProgress();
  try {
    const answer = await runAnalysis(deps, principal, body, requestId, startedAt, progress);
    await storeAnswer(deps.db, { userId, requestId, response: answer });
    return answer;
  } catch (err) {
    // Refused before any workflow started (bad image, unknown schema): nothing ran under this id,
    // so it is free again for a corrected request.
    if (!progress.started && binding.kind === 'new') await unbindRequest(deps.db, { userId, requestId });
    // A failed request keeps no image it brought: nobody pays for storing it. A workflow that may
    // still run (the wait was abandoned) keeps its images; the blob collector takes them later.
    if (!progress.started || progress.ended) await deleteUnreferencedBlobs(deps.db, deps.blobs, progress.stored);
    throw err;
  }
}

interface Progress {
  /** A workflow was started (or attached to) under this request's id. */
  started: boolean;
  /** That workflow is known to have ended (its result, a failure, was received). */
  ended: boolean;
  /** Blobs this request wrote (bytes nobody had stored before). */
  stored: string[];
}

const newProgress = (): Progress => ({ started: false, ended: false, stored: [] });

/** Await a workflow's answer, noting when its failure means the run has ended. */
async function untilEnded<T>(progress: Progress, run: () => Promise<T>): Promise<T> {
  progress.started = true;
  try {
    return await run();
  } catch (err) {
    // 503: Temporal unreachable or this server shutting down; the run may go on, unless Temporal
    // refused its start outright.
    if (err instanceof WorkflowNotStarted || !(err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE')) progress.ended = true;
    throw err;
  }
}

async function runAnalysis(
  deps: AnalyzeDeps,
  principal: Principal,
  body: AnalyzeBody,
  requestId: string,
  startedAt: number,
  progress: Progress,
): Promise<Analysis> {
  const { inputs, multi } = imageInputs(body);
  const resolved = resolveLenses({
    preset: body.preset,
    modules: body.modules,
    modulesAdd: body.modulesAdd,
    modulesRemove: body.modulesRemove,
    moduleOptions: body.moduleOptions,
  });
  const lenses: string[] = resolved.lenses;
  const warnings = [...resolved.warnings];
  const extract = checkExtract(body.extract);
  const includeFingerprint = body.options?.includeFingerprint === true;
  const includeEmbedding = body.options?.includeEmbedding === true;

  if (principal.sandbox) return sandboxAnalysis(deps, principal, lenses, resolved.outputSchema, inputs.length, multi, requestId, startedAt, warnings, extract);
  const userId = principal.userId!;
  if (!deps.temporal) throw new AppError('PROVIDER_UNAVAILABLE', 'The analysis pipeline is not connected');
  const pipeline = { ...deps, temporal: deps.temporal };

  // A saved schema is the caller's own: unknown or another user's id is 404 before anything moves.
  let extractInput: AnalyzeInput['extract'];
  if (extract) {
    if (extract.schemaId !== undefined) {
      const saved = await getBespokeSchema(deps.db, userId, extract.schemaId);
      if (!saved) throw new AppError('SCHEMA_NOT_FOUND', `No saved schema ${extract.schemaId} for this account`);
      extractInput = { schemaId: extract.schemaId, schema: saved as unknown as Record<string, unknown> };
    } else if (extract.schema !== undefined) {
      extractInput = { schema: extract.schema as unknown as Record<string, unknown> };
    } else {
      extractInput = { prompt: extract.prompt! };
    }
  }

  const embeddings = new Map<string, number[]>();
  let allRegistered = true;
  const refs: ImageRef[] = await mapBounded(inputs, INTAKE_CONCURRENCY, async (input) => {
    const img = await intakeImage(input, {
      blobs: deps.blobs,
      maxBytes: deps.config.IMAGE_MAX_BYTES,
      maxPixels: deps.config.IMAGE_MAX_PIXELS,
      fetchOptions: fetchPolicy(deps.config, deps.fetchOptions),
      knownFingerprint: (sha256) => photoFingerprint(deps.db, userId, sha256),
    }, { embedding: includeEmbedding });
    if (img.stored) progress.stored.push(img.sha256);
    if (img.embedding) embeddings.set(img.sha256, img.embedding);
    if (img.registered === false) allRegistered = false;
    return { sha256: img.sha256, format: img.format, width: img.width, height: img.height, pHash: img.pHash, dHash: img.dHash };
  });
  const shas = refs.map((r) => r.sha256);
  if (resolved.outputSchema === 'vehicle') {
    if (extractInput) throw validationFailed('body.extract: not available with the vehicle-condition stack');
    return untilEnded(progress, () => vehicleAnalysis(pipeline, userId, body, refs, requestId, startedAt, warnings));
  }

  // A full cache hit needs no vendor and no credits: answer from the registry without a workflow.
  // Extraction always runs (it bypasses the projection), so it never takes this path. A request
  // whose own workflow already ran (a client retrying with its x-request-id) would hit the very
  // records it paid for: it attaches to that run instead and gets its answer and charge.
  // Intake already knows when a photo is new to the caller's registry: then nothing can hit.
  if (!body.refresh && !extractInput && allRegistered) {
    const photos = await getPhotos(deps.db, userId, [...new Set(shas)]);
    const complete = shas.every((s) => lenses.every((l) => photos.get(s)?.lenses[l]));
    if (complete && !(await analysisPersisted(deps.db, `analyze:${userId}:${requestId}`))) {
      await recordCacheHit(deps.db, userId, shas);
      const list = shas.map((s) => photos.get(s)!);
      const origin = originOf(list, lenses);
      const perImage: PerImage[] = list.map((p) => ({ sha256: p.sha256, pHash: p.pHash, dHash: p.dHash, output: photoOutput(p, lenses), cacheHit: true, creditsCharged: 0 }));
      if (includeEmbedding) addEmbeddings(embeddings, perImage);
      const first = perImage[0]!;
      return analysisEnvelope({
        id: newAnalysisId(),
        createdAt: new Date().toISOString(),
        output: assembleOutput(perImage, multi, includeFingerprint, includeEmbedding),
        outputSchema: resolved.outputSchema,
        usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0, modulesUsed: lenses, creditsCharged: 0 },
        warnings,
        meta: {
          processingTimeMs: Math.round(performance.now() - startedAt),
          provider: origin?.provider ?? 'registry',
          promptHash: null,
          requestId,
          ai_generated: true,
          model: origin?.model ?? 'registry',
          vendor: origin?.vendor ?? deps.vendors[0] ?? 'openai',
          cacheHit: true,
        },
        ...(includeEmbedding && first.embedding ? { embedding: first.embedding } : {}),
        ...(includeFingerprint ? { fingerprint: { pHash: first.pHash, dHash: first.dHash, sha256: first.sha256 } } : {}),
      });
    }
  }

  if (!deps.vendors.length) throw new AppError('PROVIDER_UNAVAILABLE', 'No AI provider is configured');
  const input: AnalyzeInput = {
    requestId,
    userId,
    stack: resolved.stack,
    images: refs,
    lenses,
    billable: resolved.billable,
    refresh: body.refresh,
    ...(body.context ? { context: body.context } : {}),
    ...(body.moduleOptions ? { moduleOptions: body.moduleOptions } : {}),
    vendors: deps.vendors,
    vendorAttemptTimeoutMs: vendorAttemptTimeoutMs({ workflowTimeoutMs: deps.config.WORKFLOW_TIMEOUT_MS, vendors: deps.vendors.length }),
    reservationTtlMs: deps.config.RESERVATION_TTL_MS,
    imageConcurrency: 8,
    ...(extractInput ? { extract: extractInput } : {}),
  };
  const result = await untilEnded(progress, () => runWorkflow(pipeline, input));

  // The run's own outputs are in its result; only lenses it did not run are read from the registry.
  const ran = result.images.filter((r) => r.vendor);
  const lead = ran[0];
  const fromRegistry = !lead || result.images.some((r) => lenses.some((l) => !r.outputs[l]));
  const photos = fromRegistry ? await getPhotos(deps.db, userId, [...new Set(shas)]) : new Map<string, RegistryPhoto>();
  const perImage: PerImage[] = result.images.map((r) => {
    const p = photos.get(r.sha256);
    if (fromRegistry && !p) throw new AppError('INTERNAL_ERROR', 'Analysis finished but its photo is missing from the registry');
    const output = lensOutput(lenses, (l) => r.outputs[l] ?? p?.lenses[l]?.output);
    if (extractInput) output.bespoke = { schemaId: result.bespokeSchemaId ?? null, data: r.bespoke ?? null };
    return { sha256: r.sha256, pHash: r.pHash, dHash: r.dHash, output, cacheHit: r.ran.length === 0 && !extractInput, creditsCharged: r.credits };
  });
  if (includeEmbedding) addEmbeddings(embeddings, perImage);
  const origin = lead ? { vendor: lead.vendor!, model: lead.model!, provider: lead.provider! } : originOf([...photos.values()], lenses);
  const inputTokens = result.images.reduce((n, r) => n + r.inputTokens, 0);
  const outputTokens = result.images.reduce((n, r) => n + r.outputTokens, 0);
  for (const r of result.images) {
    if (r.fellBackFrom.length) warnings.push(`image ${r.sha256.slice(0, 12)}: ${r.fellBackFrom.join(', ')} failed; answered by ${r.vendor}`);
  }
  if (ran.some((r) => r.simulated)) warnings.push('simulated: answered by the Lenstack vendor simulator, not a real AI model (no vendor API key configured)');
  const providers = [...new Set(ran.map((r) => r.provider))];
  const first = perImage[0]!;
  return analysisEnvelope({
    id: newAnalysisId(),
    createdAt: new Date().toISOString(),
    output: assembleOutput(perImage, multi, includeFingerprint, includeEmbedding),
    outputSchema: resolved.outputSchema,
    usage: {
      inputTokens,
      outputTokens,
      totalTokens: inputTokens + outputTokens,
      modulesUsed: extractInput ? [...lenses, 'bespoke'] : lenses,
      creditsCharged: result.creditsCharged,
    },
    warnings,
    meta: {
      processingTimeMs: Math.round(performance.now() - startedAt),
      provider: providers.length > 1 ? providers.join(', ') : (origin?.provider ?? 'registry'),
      promptHash: lead?.promptHash ?? null,
      requestId,
      ai_generated: true,
      model: origin?.model ?? 'registry',
      vendor: origin?.vendor ?? deps.vendors[0]!,
      cacheHit: false,
    },
    ...(includeEmbedding && first.embedding ? { embedding: first.embedding } : {}),
    ...(includeFingerprint ? { fingerprint: { pHash: first.pHash, dHash: first.dHash, sha256: first.sha256 } } : {}),
  });
}

/** The local visual embedding of each image (images/embedding.ts), made by intake's one decode. */
function addEmbeddings(embeddings: Map<string, number[]>, perImage: PerImage[]): void {
  for (const p of perImage) {
    const embedding = embeddings.get(p.sha256);
    if (!embedding) throw new Error(`no embedding was made for ${p.sha256} at intake`);
    p.embedding = embedding;
  }
}

/** Start the saga (or attach to the one this request id already started) and await it. */
function runWorkflow(deps: AnalyzeDeps & { temporal: Client }, input: AnalyzeInput): Promise<AnalyzeResult> {
  const workflowId = `analyze:${input.userId}:${input.requestId}`;
  return startAndAwait<AnalyzeResult>(deps, 'analyze', workflowId, () =>
    deps.temporal.workflow.start(analyzeWorkflow, {
      taskQueue: deps.config.TEMPORAL_TASK_QUEUE,
      workflowId,
      args: [input],
      workflowExecutionTimeout: deps.config.WORKFLOW_TIMEOUT_MS,
      // A retried request (same x-request-id) gets the first run's answer instead of a second bill.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.userId, value: input.userId },
        { key: SEARCH_ATTRIBUTES.requestId, value: input.requestId },
        { key: SEARCH_ATTRIBUTES.stack, value: input.stack ?? 'custom' },
        { key: SEARCH_ATTRIBUTES.imageCount, value: input.images.length },
      ],
    }),
  );
}

type ExtractRequest = NonNullable<AnalyzeBody['extract']>;

/** SPEC: exactly one of prompt, schema, schemaId; an inline schema within our limits. */
function checkExtract(extract: AnalyzeBody['extract']): ExtractRequest | undefined {
  if (!extract) return undefined;
  const given = [extract.prompt, extract.schema, extract.schemaId].filter((v) => v !== undefined).length;
  if (given !== 1) throw validationFailed('body.extract: provide exactly one of prompt, schema or schemaId');
  if (extract.schema) {
    const parsed = bespokeSchemaInput.safeParse(extract.schema);
    if (!parsed.success) {
      throw validationFailed(parsed.error.issues.slice(0, 5).map((i) => `body.extract.schema.${i.path.join('.')}: ${i.message}`).join('; '));
    }
    const problems = checkBespokeSchema(parsed.data as BespokeSchema);
    if (problems.length) throw validationFailed(`body.${problems.join('; body.')}`);
    return { ...extract, schema: parsed.data };
  }
  return extract;
}

/** Sandbox extraction: schema-shaped fixture data, no AI call (a prompt gets a one-field fixture). */
function sandboxBespoke(extract: ExtractRequest): unknown {
  if (!extract.schema) return { answer: 'sandbox fixture: bespoke extraction runs with a live key' };
  return generate(toStrictJsonSchema(extract.schema as BespokeSchema) as never, { seedKey: 'sandbox' });
}

const ANON_CREATED_AT = '2026-01-01T00:00:00.000Z';

/** svc_test_ keys: fixtures, instantly, no workflow, no vendor, nothing billed or stored. */
function sandboxAnalysis(
  deps: AnalyzeDeps,
  principal: Principal,
  lenses: string[],
  outputSchema: 'photo' | 'vehicle',
  imageCount: number,
  multi: boolean,
  requestId: string,
  startedAt: number,
  warnings: string[],
  extract: ExtractRequest | undefined,
): Analysis {
  // The public anonymous key always gets the same fixed payload, whatever it asks for.
  const effective = principal.anonymous ? ['moderation', 'describe', 'dating'] : lenses;
  const fixture = sandboxOutput(effective as never) as Record<string, unknown>;
  if (extract && !principal.anonymous) fixture.bespoke = { schemaId: null, data: sandboxBespoke(extract) };
  // The vehicle report is one report over all photos, not one output per photo.
  const output = multi && !principal.anonymous && outputSchema !== 'vehicle'
    ? { images: Array.from({ length: imageCount }, (_, index) => ({ index, sha256: null, cacheHit: false, creditsCharged: 0, ...fixture })) }
    : fixture;
  return analysisEnvelope({
    id: principal.anonymous ? 'ana_sandbox_anonymous' : newAnalysisId(),
    createdAt: principal.anonymous ? ANON_CREATED_AT : new Date().toISOString(),
    output,
    outputSchema: principal.anonymous ? 'photo' : outputSchema,
    usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0, modulesUsed: effective, creditsCharged: 0 },
    warnings: [...(principal.anonymous ? [] : warnings), 'sandbox: fixture data from a svc_test_ key; no AI call was made and nothing was billed'],
    meta: {
      processingTimeMs: principal.anonymous ? 0 : Math.round(performance.now() - startedAt),
      provider: 'sandbox',
      promptHash: null,
      requestId,
      ai_generated: true,
      model: 'sandbox-fixtures',
      vendor: deps.vendors[0] ?? 'openai',
      cacheHit: false,
    },
  });
}
