import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  proxyActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import type { AnalyzeInput, AnalyzeResult, ImageResult, Vendor, VendorCallResult } from './types.ts';
import { VENDOR_INVALID_OUTPUT, VENDOR_NOT_CONFIGURED, VENDOR_REJECTED } from './types.ts';

// One proxy per latency profile (STYLE.md): fast database steps, and slow vendor calls.
const db = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '5 seconds',
    maximumAttempts: 20,
    nonRetryableErrorTypes: ['PLAN_LIMIT_EXCEEDED', 'IMAGE_INVALID'],
  },
});

// Vendor activities heartbeat every second, so a worker killed mid-call is noticed in seconds
// and the call is retried elsewhere; the retry policy is bounded, then we fall back.
const vendor = proxyActivities<Activities>({
  startToCloseTimeout: '120 seconds',
  heartbeatTimeout: '5 seconds',
  retry: {
    initialInterval: '500 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '4 seconds',
    maximumAttempts: 3,
    nonRetryableErrorTypes: [VENDOR_REJECTED, VENDOR_INVALID_OUTPUT, VENDOR_NOT_CONFIGURED],
  },
});

const VENDOR_ACTIVITY = {
  openai: vendor.callOpenAI,
  anthropic: vendor.callAnthropic,
  google: vendor.callGoogle,
} as const;

/** Run `fn` over `items` with at most `limit` in flight, keeping result order. */
async function mapBounded<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(lanes);
  return results;
}

function failureType(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure ? (cause.type ?? undefined) : undefined;
}

/**
 * The analyze saga: fingerprint → delta → reserve → vendors (retry, then fall back) → persist →
 * settle. Any failure after the reservation releases it in a non-cancellable scope, then fails.
 */
export async function analyzeWorkflow(input: AnalyzeInput): Promise<AnalyzeResult> {
  const { workflowId } = workflowInfo();
  const compensations: Array<() => Promise<unknown>> = [];
  try {
    const fingerprints = await mapBounded(input.images, 8, (img) => db.fingerprintImage({ sha256: img.sha256 }));

    const unique = [...new Set(input.images.map((i) => i.sha256))];
    const cached = input.refresh
      ? Object.fromEntries(unique.map((s) => [s, [] as string[]]))
      : await db.cachedLenses({ userId: input.userId, sha256s: unique, lenses: input.lenses });

    // The same photo twice in one request is analyzed and billed once.
    const firstIndex = new Map<string, number>();
    input.images.forEach((img, i) => {
      if (!firstIndex.has(img.sha256)) firstIndex.set(img.sha256, i);
    });
    const plans = input.images.map((img, i) => {
      const have = new Set(cached[img.sha256] ?? []);
      const ran = firstIndex.get(img.sha256) === i ? input.lenses.filter((l) => !have.has(l)) : [];
      const billed = ran.filter((l) => input.billable.includes(l));
      return { img, ran, billed };
    });
    const needed = plans.reduce((n, p) => n + p.billed.length, 0);

    const reservationId = `res:${workflowId}`;
    if (needed > 0) {
      await db.reserveCredits({ id: reservationId, userId: input.userId, amount: needed, ttlMs: input.reservationTtlMs, workflowId });
      compensations.unshift(() => db.releaseCredits({ id: reservationId, reason: 'analysis failed' }));
    }

    const calls = await mapBounded(plans, input.imageConcurrency, async (plan) => {
      if (!plan.ran.length) return { result: null as VendorCallResult | null, fellBackFrom: [] as Vendor[] };
      const fellBackFrom: Vendor[] = [];
      let explicitError = false;
      let lastMessage = 'no AI provider is configured';
      for (const v of input.vendors) {
        try {
          const result = await VENDOR_ACTIVITY[v]({
            userId: input.userId,
            sha256: plan.img.sha256,
            lenses: plan.ran,
            context: input.context,
            moduleOptions: input.moduleOptions,
          });
          return { result, fellBackFrom };
        } catch (err) {
          const type = failureType(err);
          if (type === VENDOR_REJECTED || type === VENDOR_INVALID_OUTPUT) explicitError = true;
          lastMessage = (err instanceof ActivityFailure && err.cause ? err.cause.message : (err as Error).message) ?? lastMessage;
          fellBackFrom.push(v);
        }
      }
      throw ApplicationFailure.nonRetryable(
        `Every configured AI provider failed (${fellBackFrom.join(', ') || 'none configured'}): ${lastMessage}`,
        explicitError ? 'PROVIDER_ERROR' : 'PROVIDER_UNAVAILABLE',
      );
    });

    const persisted = await db.persistAnalysis({
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
    });

    // Charge what persisting found new: a lens a concurrent request recorded first is not billed twice.
    if (needed > 0) await db.settleCredits({ id: reservationId, charge: persisted.charged });

    const images: ImageResult[] = plans.map((plan, i) => {
      const call = calls[i]!;
      const r = call.result;
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
      };
    });
    return { workflowId, images, creditsCharged: persisted.charged };
  } catch (err) {
    // Compensate newest-first; a cancelled workflow still releases what it holds.
    await CancellationScope.nonCancellable(async () => {
      for (const undo of compensations) await undo();
    });
    throw err;
  }
}
