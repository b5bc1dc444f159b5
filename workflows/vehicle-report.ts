import { CancellationScope, workflowInfo } from '@temporalio/workflow';
import { callWithFallback, db, DB_OPTIONS, mapBounded, shared, short } from './steps.ts';
import type { Vendor, VehicleReportInput, VehicleReportResult } from './types.ts';
import { VEHICLE_REPORT_CREDITS } from './types.ts';

const PHOTO_STEP = 'vehicle-photo';

/**
 * The vehicle-condition stack as a saga: fingerprint every photo → reserve the report's credit →
 * fan out one vendor call per new photo (bounded; photos seen in earlier reports are reused) →
 * one synthesis call over all per-photo findings → persist findings and the report → settle.
 * Every step is a labelled activity, so an operator can follow a 50-photo report in the UI.
 */
export async function vehicleReportWorkflow(input: VehicleReportInput): Promise<VehicleReportResult> {
  const { workflowId } = workflowInfo();
  const compensations: Array<() => Promise<unknown>> = [];
  const count = input.images.length;
  try {
    const fingerprints = await mapBounded(input.images, 8, async (img, i) =>
      img.pHash && img.dHash
        ? { pHash: img.pHash, dHash: img.dHash }
        : shared.fingerprintImage.executeWithOptions({ ...DB_OPTIONS, summary: `fingerprint photo ${i + 1}/${count} ${short(img.sha256)}` }, [{ sha256: img.sha256 }]),
    );
    const unique = [...new Set(input.images.map((i) => i.sha256))];
    const known = input.refresh ? {} : await db.lensOutputs({ userId: input.userId, sha256s: unique, lens: PHOTO_STEP });

    const reservationId = `res:${workflowId}`;
    await db.reserveCredits({ id: reservationId, userId: input.userId, amount: VEHICLE_REPORT_CREDITS, ttlMs: input.reservationTtlMs, workflowId });
    compensations.unshift(() => db.releaseCredits({ id: reservationId, reason: 'vehicle report failed' }));

    // Fan out over the photos not already described, first occurrence of each photo only.
    const firstIndex = new Map<string, number>();
    input.images.forEach((img, i) => {
      if (!firstIndex.has(img.sha256)) firstIndex.set(img.sha256, i);
    });
    const todo = unique.filter((s) => !known[s]);
    let inputTokens = 0;
    let outputTokens = 0;
    const fellBack = new Set<Vendor>();
    const fresh = await mapBounded(todo, input.photoConcurrency, async (sha256) => {
      const index = firstIndex.get(sha256)!;
      const { result, fellBackFrom } = await callWithFallback(
        input.vendors,
        { userId: input.userId, sha256, task: { kind: 'vehicle-photo', photoIndex: index, photoCount: count }, ...(input.context ? { context: input.context } : {}) },
        `vehicle photo ${index + 1}/${count} ${short(sha256)}`,
      );
      inputTokens += result.inputTokens;
      outputTokens += result.outputTokens;
      fellBackFrom.forEach((v) => fellBack.add(v));
      return { sha256, result };
    });
    const findingsBySha: Record<string, Record<string, unknown>> = { ...known };
    for (const f of fresh) findingsBySha[f.sha256] = f.result.outputs[PHOTO_STEP]!;

    const synthesis = await callWithFallback(
      input.vendors,
      {
        userId: input.userId,
        sha256: input.images[0]!.sha256,
        task: { kind: 'vehicle-report', findings: input.images.map((img, index) => ({ index, findings: findingsBySha[img.sha256] ?? null })) },
        ...(input.context ? { context: input.context } : {}),
      },
      `vehicle report over ${count} photos`,
    );
    synthesis.fellBackFrom.forEach((v) => fellBack.add(v));
    const s = synthesis.result;
    const report = s.outputs['vehicle-condition']!;

    await db.persistAnalysis({
      workflowId,
      requestId: input.requestId,
      userId: input.userId,
      refresh: input.refresh,
      images: input.images.map((img, i) => {
        const done = fresh.find((f) => f.sha256 === img.sha256 && firstIndex.get(img.sha256) === i)?.result;
        return {
          sha256: img.sha256,
          pHash: fingerprints[i]!.pHash,
          dHash: fingerprints[i]!.dHash,
          outputs: done?.outputs ?? {},
          versions: done?.versions ?? {},
          billed: [],
          lenses: done ? Object.keys(done.outputs) : [],
          provider: done?.provider ?? 'registry',
          vendor: done?.vendor ?? 'registry',
          model: done?.model ?? 'registry',
        };
      }),
    });
    const reportId = await db.saveVehicleReport({
      workflowId,
      userId: input.userId,
      setHash: input.setHash,
      sha256s: input.images.map((i) => i.sha256),
      output: report,
      version: s.versions['vehicle-condition'] ?? '0',
      provider: s.provider,
      vendor: s.vendor,
      model: s.model,
      credits: VEHICLE_REPORT_CREDITS,
    });
    await db.settleCredits({ id: reservationId, charge: VEHICLE_REPORT_CREDITS });
    return {
      workflowId,
      reportId,
      report,
      images: input.images.map((img, i) => ({ sha256: img.sha256, pHash: fingerprints[i]!.pHash, dHash: fingerprints[i]!.dHash })),
      creditsCharged: VEHICLE_REPORT_CREDITS,
      vendor: s.vendor,
      model: s.model,
      provider: s.provider,
      simulated: s.simulated,
      promptHash: s.promptHash,
      inputTokens: inputTokens + s.inputTokens,
      outputTokens: outputTokens + s.outputTokens,
      photosReused: unique.length - todo.length,
      fellBackFrom: [...fellBack],
    };
  } catch (err) {
    await CancellationScope.nonCancellable(async () => {
      for (const undo of compensations) await undo();
    });
    throw err;
  }
}
