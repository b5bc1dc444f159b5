import type { Client } from '@temporalio/client';
import { AppError } from '../core/errors.ts';
import { interactiveTaskQueue } from '../core/config.ts';
import { getPhotos, type RegistryPhoto } from '../registry/photos.ts';
import { analyzeWorkflow } from '../workflows/analyze.ts';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import type { AnalyzeInput, AnalyzeResult } from '../workflows/types.ts';
import { startAndAwait } from './await-workflow.ts';
import type { Analysis } from './contract.ts';
import { embeddingOf, type TakenImages } from './intake.ts';
import { untilEnded, type Progress } from './progress.ts';
import type { AnalysisRequest } from './request.ts';
import { assembleOutput, buildAnalysis, firstImageExtras, lensOutput, originOf, type PerImage } from './response.ts';
import type { AnalyzeDeps } from './deps.ts';

/** Images of one request that the saga works on at once. */
const IMAGE_CONCURRENCY = 8;

/** Run the analyze saga for the request (or attach to the run its request id started) and answer from its result. */
export async function runAnalysis(
  deps: AnalyzeDeps & { temporal: Client },
  accountId: string,
  request: AnalysisRequest,
  taken: TakenImages,
  requestId: string,
  startedAt: number,
  progress: Progress,
): Promise<Analysis> {
  const { body, resolved, lenses, extractInput } = request;
  const input: AnalyzeInput = {
    requestId,
    userId: accountId,
    stack: resolved.stack,
    images: taken.refs,
    lenses,
    billable: resolved.billable,
    refresh: body.refresh,
    ...(body.context ? { context: body.context } : {}),
    ...(body.moduleOptions ? { moduleOptions: body.moduleOptions } : {}),
    reservationTtlMs: deps.config.RESERVATION_TTL_MS,
    imageConcurrency: IMAGE_CONCURRENCY,
    ...(extractInput ? { extract: extractInput } : {}),
  };
  const result = await untilEnded(progress, () => startWorkflow(deps, input));

  // The run's own outputs are in its result; only lenses it did not run are read from the registry.
  const ran = result.images.filter((r) => r.vendor);
  const lead = ran[0];
  const fromRegistry = !lead || result.images.some((r) => lenses.some((l) => !r.outputs[l]));
  const photos = fromRegistry ? await getPhotos(deps.db, accountId, [...new Set(taken.refs.map((r) => r.sha256))]) : new Map<string, RegistryPhoto>();
  const perImage: PerImage[] = result.images.map((r) => {
    const p = photos.get(r.sha256);
    if (fromRegistry && !p) throw new AppError('INTERNAL_ERROR', 'Analysis finished but its photo is missing from the registry');
    const output = lensOutput(lenses, (l) => r.outputs[l] ?? p?.lenses[l]?.output);
    if (extractInput) output.bespoke = { schemaId: result.bespokeSchemaId ?? null, data: r.bespoke ?? null };
    return {
      sha256: r.sha256,
      pHash: r.pHash,
      dHash: r.dHash,
      output,
      cacheHit: r.ran.length === 0 && !extractInput,
      creditsCharged: r.credits,
      ...(request.includeEmbedding ? { embedding: embeddingOf(taken, r.sha256) } : {}),
    };
  });
  const origin = lead ? { vendor: lead.vendor!, model: lead.model!, provider: lead.provider! } : originOf([...photos.values()], lenses);
  const warnings = [...request.warnings];
  for (const r of result.images) {
    if (r.fellBackFrom.length) warnings.push(`image ${r.sha256.slice(0, 12)}: ${r.fellBackFrom.join(', ')} failed; answered by ${r.vendor}`);
  }
  if (ran.some((r) => r.simulated)) warnings.push('simulated: answered by the Lenstack vendor simulator, not a real AI model (no vendor API key configured)');
  const providers = [...new Set(ran.map((r) => r.provider))];
  return buildAnalysis({
    output: assembleOutput(perImage, request.multi, request.includeFingerprint, request.includeEmbedding),
    outputSchema: resolved.outputSchema,
    modulesUsed: extractInput ? [...lenses, 'bespoke'] : lenses,
    inputTokens: result.images.reduce((n, r) => n + r.inputTokens, 0),
    outputTokens: result.images.reduce((n, r) => n + r.outputTokens, 0),
    creditsCharged: result.creditsCharged,
    warnings,
    origin: {
      provider: providers.length > 1 ? providers.join(', ') : (origin?.provider ?? 'registry'),
      model: origin?.model ?? 'registry',
      vendor: origin?.vendor ?? deps.config.VENDOR_ORDER[0]!,
    },
    promptHash: lead?.promptHash ?? null,
    cacheHit: false,
    requestId,
    startedAt,
    ...firstImageExtras(perImage, request.includeFingerprint, request.includeEmbedding),
  });
}

/** Start the saga (or attach to the one this request id already started) and await it. */
function startWorkflow(deps: AnalyzeDeps & { temporal: Client }, input: AnalyzeInput): Promise<AnalyzeResult> {
  const workflowId = `analyze:${input.userId}:${input.requestId}`;
  return startAndAwait<AnalyzeResult>(deps, 'analyze', workflowId, () =>
    deps.temporal.workflow.start(analyzeWorkflow, {
      // Ahead of batch work: its own queue and worker slots, which a batch's children never take
      // (they run on TEMPORAL_TASK_QUEUE with their parent; docs/decisions.md, "Interactive work ahead of batches").
      taskQueue: interactiveTaskQueue(deps.config),
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
