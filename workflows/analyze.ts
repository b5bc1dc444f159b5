import { ApplicationFailure, CancellationScope, patched, workflowInfo } from '@temporalio/workflow';
import { callWithFallback, db, DB_LOCAL_OPTIONS, mapBounded, short } from './steps.ts';
import type { AnalyzeInput, AnalyzeResult, BespokeTask, ImageResult, Vendor, VendorCallResult } from './types.ts';
import { EXTRACT_CREDITS } from './types.ts';
import { planDelta } from './plan.ts';

/** Patch id: the delta+reservation and the persist+settlement each became one local activity. */
const ONE_STEP_BILLING = 'one-step-billing';

/**
 * The analyze saga: fingerprint → delta → reserve → vendors (retry, then fall back) → persist →
 * settle. Any failure after the reservation releases it in a non-cancellable scope, then fails.
 * With `extract` (v2) the bespoke schema is drafted/saved after the reservation and rides along
 * each image's vendor call; it always bills EXTRACT_CREDITS and bypasses the projection.
 */
export async function analyzeWorkflow(input: AnalyzeInput): Promise<AnalyzeResult> {
  const { workflowId } = workflowInfo();
  const compensations: Array<() => Promise<unknown>> = [];
  try {
    const fingerprints = await mapBounded(input.images, 8, async (img, i) =>
      img.pHash && img.dHash
        ? { pHash: img.pHash, dHash: img.dHash }
        : db.fingerprintImage.executeWithOptions(
        { ...DB_LOCAL_OPTIONS, summary: `fingerprint image ${i + 1}/${input.images.length} ${short(img.sha256)}` },
        [{ sha256: img.sha256 }],
      ),
    );

    const extracting = input.extract !== undefined;
    const reservationId = `res:${workflowId}`;
    const sha256s = input.images.map((i) => i.sha256);
    const extraCredits = extracting ? EXTRACT_CREDITS : 0;
    // Histories recorded before the delta and its reservation became one step replay the old way.
    const oneStepBilling = patched(ONE_STEP_BILLING);
    let cached: Record<string, string[]>;
    let needed = -1; // unknown until the step answers
    if (oneStepBilling) {
      // Registered first, so a step that reserved and then lost its answer is still undone;
      // releasing a reservation that was never made is a no-op.
      compensations.unshift(() => (needed === 0 ? Promise.resolve() : db.releaseCredits({ id: reservationId, reason: 'analysis failed' })));
      ({ cached, needed } = await db.reserveDelta({
        reservationId,
        userId: input.userId,
        workflowId,
        ttlMs: input.reservationTtlMs,
        sha256s,
        lenses: input.lenses,
        billable: input.billable,
        refresh: input.refresh,
        extraCredits,
      }));
    } else {
      const unique = [...new Set(sha256s)];
      cached = input.refresh
        ? Object.fromEntries(unique.map((s) => [s, [] as string[]]))
        : await db.cachedLenses({ userId: input.userId, sha256s: unique, lenses: input.lenses });
      needed = planDelta({ sha256s, lenses: input.lenses, billable: input.billable, cached }).needed + extraCredits;
      if (needed > 0) {
        await db.reserveCredits({ id: reservationId, userId: input.userId, amount: needed, ttlMs: input.reservationTtlMs, workflowId });
        compensations.unshift(() => db.releaseCredits({ id: reservationId, reason: 'analysis failed' }));
      }
    }
    const plans = planDelta({ sha256s, lenses: input.lenses, billable: input.billable, cached }).plans.map((plan, i) => ({ ...plan, img: input.images[i]! }));

    let bespoke: BespokeTask | undefined;
    let bespokeSchemaId: string | undefined;
    if (input.extract) {
      let schema = input.extract.schema;
      if (input.extract.prompt !== undefined) {
        const drafted = await callWithFallback(
          input.vendors,
          { userId: input.userId, sha256: input.images[0]!.sha256, task: { kind: 'draft-schema', prompt: input.extract.prompt } },
          'draft the bespoke schema from the prompt',
        );
        schema = drafted.result.data;
      }
      if (!schema) throw ApplicationFailure.nonRetryable('extract has no schema', 'VALIDATION_FAILED');
      bespokeSchemaId = input.extract.schemaId ?? (await db.saveBespokeSchema({ userId: input.userId, schema, prompt: input.extract.prompt ?? null }));
      bespoke = { schema, ...(input.extract.prompt !== undefined ? { prompt: input.extract.prompt } : {}) };
    }

    const calls = await mapBounded(plans, input.imageConcurrency, async (plan, i) => {
      // Extraction bypasses the projection: every first copy of a photo gets a call for it.
      if (!plan.ran.length && !(bespoke && plan.first)) return { result: null as VendorCallResult | null, fellBackFrom: [] as Vendor[] };
      const what = [plan.ran.length ? plan.ran.join(', ') : null, bespoke ? 'bespoke' : null].filter(Boolean).join(' + ');
      return callWithFallback(
        input.vendors,
        {
          userId: input.userId,
          sha256: plan.img.sha256,
          task: { kind: 'lenses', lenses: plan.ran, ...(bespoke ? { bespoke } : {}) },
          ...(input.context ? { context: input.context } : {}),
          ...(input.moduleOptions ? { moduleOptions: input.moduleOptions } : {}),
        },
        `image ${i + 1}/${plans.length} ${short(plan.img.sha256)}: ${what}`,
      );
    });

    const persistArgs = {
      workflowId,
      requestId: input.requestId,
      userId: input.userId,
      refresh: input.refresh,
      images: plans.map((plan, i) => {
        const r = calls[i]!.result;
        return {
          sha256: plan.img.sha256,
          pHash: fingerprints[i]!.pHash,
          dHash: fingerprints[i]!.dHash,
          outputs: r?.outputs ?? {},
          versions: r?.versions ?? {},
          billed: plan.billed,
          lenses: plan.ran,
          provider: r?.provider ?? 'registry',
          vendor: r?.vendor ?? 'registry',
          model: r?.model ?? 'registry',
        };
      }),
    };
    // Charge what persisting found new (a lens a concurrent request recorded first is not billed
    // twice), plus the extraction, which bills every call.
    let persisted: { charged: number; chargedPerImage: number[] };
    if (oneStepBilling) {
      // The records and the charge for them commit in one transaction.
      persisted = await db.persistAndSettle({ ...persistArgs, settle: needed > 0 ? { reservationId, extraCharge: extraCredits } : null });
    } else {
      persisted = await db.persistAnalysis(persistArgs);
      if (needed > 0) await db.settleCredits({ id: reservationId, charge: persisted.charged + extraCredits });
    }
    const charge = persisted.charged + extraCredits;

    const images: ImageResult[] = plans.map((plan, i) => {
      const call = calls[i]!;
      const r = call.result;
      const source = r ?? calls[plan.source]!.result;
      return {
        sha256: plan.img.sha256,
        pHash: fingerprints[i]!.pHash,
        dHash: fingerprints[i]!.dHash,
        ran: plan.ran,
        billed: plan.billed,
        credits: persisted.chargedPerImage[i] ?? 0,
        vendor: r?.vendor ?? null,
        model: r?.model ?? null,
        provider: r?.provider ?? null,
        simulated: r?.simulated ?? false,
        promptHash: r?.promptHash ?? null,
        inputTokens: r?.inputTokens ?? 0,
        outputTokens: r?.outputTokens ?? 0,
        fellBackFrom: call.fellBackFrom,
        ...(bespoke && source?.data ? { bespoke: source.data } : {}),
      };
    });
    return { workflowId, images, creditsCharged: charge, ...(bespokeSchemaId ? { bespokeSchemaId } : {}) };
  } catch (err) {
    // Compensate newest-first; a cancelled workflow still releases what it holds.
    await CancellationScope.nonCancellable(async () => {
      for (const undo of compensations) await undo();
    });
    throw err;
  }
}
