import { ApplicationFailure } from '@temporalio/workflow';
import { mapBounded } from '../core/map-bounded.ts';
import { imageResults, persistedImages, type ImageCall } from './analysis-result.ts';
import { callWithFallback, dbSteps, hashesWanted, short, startSaga, vendorChain, withHashes, type VendorChain } from './steps.ts';
import type { AnalyzeInput, AnalyzeResult, BespokeTask } from './types.ts';
import { BESPOKE_CREDITS } from '../credits/price-book.ts';

/**
 * The analyze saga: reserve the delta → vendors (retry, then fall back) → persist and settle.
 * A failure after the reservation releases it, then fails the workflow. With `extract` (v2) the
 * bespoke schema is drafted and saved after the reservation and rides along each image's vendor
 * call; it always bills BESPOKE_CREDITS and bypasses the projection.
 */
export async function analyzeWorkflow(input: AnalyzeInput): Promise<AnalyzeResult> {
  const { workflowId, reservationId, saga, tally } = startSaga(input);
  const extraCredits = input.extract ? BESPOKE_CREDITS : 0;
  try {
    // 1. Which lenses each image still needs, and their credits held: one step, one plan.
    const { plans, needed, vendors, overflow } = await dbSteps.reserveDelta({
      reservationId,
      userId: input.userId,
      workflowId,
      ttlMs: input.reservationTtlMs,
      sha256s: input.images.map((i) => i.sha256),
      lenses: input.lenses,
      billable: input.billable,
      refresh: input.refresh,
      extraCredits,
    });
    if (needed > 0) saga.add('release credits', () => dbSteps.releaseCredits({ id: reservationId, reason: 'analysis failed' }));
    const chain = vendorChain(vendors, tally, { lane: input.lane, overflow });

    // 2. The bespoke schema, drafted by a vendor from the caller's prompt when it has none.
    const { bespoke, bespokeSchemaId } = input.extract ? await prepareBespoke(input, chain) : { bespoke: undefined, bespokeSchemaId: undefined };

    // 3. One vendor call per image that runs anything (extraction runs on every first copy).
    const calls = await mapBounded(plans, input.imageConcurrency, async (plan, i): Promise<ImageCall> => {
      if (!plan.ran.length && !(bespoke && plan.first)) return { result: null, fellBackFrom: [] };
      const img = input.images[i]!;
      const what = [plan.ran.length ? plan.ran.join(', ') : null, bespoke ? 'bespoke' : null].filter(Boolean).join(' + ');
      return callWithFallback(
        chain,
        {
          userId: input.userId,
          sha256: img.sha256,
          task: { kind: 'lenses', lenses: plan.ran, ...(bespoke ? { bespoke } : {}) },
          ...(input.stack ? { stack: input.stack } : {}),
          ...(input.context ? { context: input.context } : {}),
          ...(input.moduleOptions ? { moduleOptions: input.moduleOptions } : {}),
          ...hashesWanted(img),
        },
        `image ${i + 1}/${plans.length} ${short(img.sha256)}: ${what}`,
      );
    });
    const images = await withHashes(input.userId, input.images, calls.map((c, i) => [input.images[i]!.sha256, c.result?.hashes] as const));

    // 4. Records and charge in one transaction: a lens a concurrent request recorded first is not
    //    billed twice; the extraction bills every call.
    const persisted = await dbSteps.persistAndSettle({
      workflowId,
      requestId: input.requestId,
      userId: input.userId,
      refresh: input.refresh,
      images: persistedImages(images, plans, calls),
      settle: needed > 0 ? { reservationId, extraCharge: extraCredits } : null,
    });

    return {
      workflowId,
      images: imageResults(images, plans, calls, persisted.chargedPerImage, bespoke !== undefined),
      creditsCharged: persisted.charged + extraCredits,
      ...(bespokeSchemaId ? { bespokeSchemaId } : {}),
    };
  } catch (err) {
    await saga.run(err);
    throw err;
  }
}

/** The extraction's schema (the caller's, or drafted from its prompt) and the saved schema's id. */
async function prepareBespoke(input: AnalyzeInput, chain: VendorChain): Promise<{ bespoke: BespokeTask; bespokeSchemaId: string }> {
  const extract = input.extract!;
  let schema = extract.schema;
  if (extract.prompt !== undefined) {
    const drafted = await callWithFallback(
      chain,
      { userId: input.userId, sha256: input.images[0]!.sha256, task: { kind: 'draft-schema', prompt: extract.prompt } },
      'draft the bespoke schema from the prompt',
    );
    schema = drafted.result.data;
  }
  if (!schema) throw ApplicationFailure.nonRetryable('extract has no schema', 'VALIDATION_FAILED');
  const bespokeSchemaId = extract.schemaId ?? (await dbSteps.saveBespokeSchema({ userId: input.userId, schema, prompt: extract.prompt ?? null }));
  return { bespoke: { schema, ...(extract.prompt !== undefined ? { prompt: extract.prompt } : {}) }, bespokeSchemaId };
}
