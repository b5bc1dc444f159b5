import type { ImagePlan } from '../credits/delta.ts';
import type { HashedRef, ImageResult, PersistedImage, Vendor, VendorCallResult } from './types.ts';

/** One image's vendor call (null when its plan ran nothing) and the vendors that failed before it. */
export interface ImageCall {
  result: VendorCallResult | null;
  fellBackFrom: Vendor[];
}

/** What persisting records for each image: this run's outputs, or a registry marker when nothing ran. */
export function persistedImages(images: readonly HashedRef[], plans: readonly ImagePlan[], calls: readonly ImageCall[]): PersistedImage[] {
  return plans.map((plan, i) => {
    const r = calls[i]!.result;
    const img = images[i]!;
    return {
      sha256: img.sha256,
      pHash: img.pHash,
      dHash: img.dHash,
      outputs: r?.outputs ?? {},
      versions: r?.versions ?? {},
      billed: plan.billed,
      lenses: plan.ran,
      provider: r?.provider ?? 'registry',
      vendor: r?.vendor ?? 'registry',
      model: r?.model ?? 'registry',
    };
  });
}

/** The workflow's answer per image: what ran, what it cost, who answered (a repeat copy takes its first copy's bespoke answer). */
export function imageResults(
  images: readonly HashedRef[],
  plans: readonly ImagePlan[],
  calls: readonly ImageCall[],
  creditsPerImage: readonly number[],
  bespoke: boolean,
): ImageResult[] {
  return plans.map((plan, i) => {
    const call = calls[i]!;
    const r = call.result;
    const source = r ?? calls[plan.source]!.result;
    const img = images[i]!;
    return {
      sha256: img.sha256,
      pHash: img.pHash,
      dHash: img.dHash,
      ran: plan.ran,
      billed: plan.billed,
      credits: creditsPerImage[i] ?? 0,
      vendor: r?.vendor ?? null,
      model: r?.model ?? null,
      provider: r?.provider ?? null,
      simulated: r?.simulated ?? false,
      promptHash: r?.promptHash ?? null,
      inputTokens: r?.inputTokens ?? 0,
      outputTokens: r?.outputTokens ?? 0,
      fellBackFrom: call.fellBackFrom,
      outputs: source?.outputs ?? {},
      ...(bespoke && source?.data ? { bespoke: source.data } : {}),
    };
  });
}
