import { patched } from '@temporalio/workflow';
import { mapBounded } from '../core/map-bounded.ts';
import { callWithFallback, dbSteps, hashesWanted, short, startSaga, vendorChain, withHashes } from './steps.ts';
import type { PreparedUpload, Vendor, VehicleReportInput, VehicleReportResult, VendorCallResult } from './types.ts';
import { VEHICLE_REPORT_CREDITS } from '../credits/price-book.ts';

const PHOTO_STEP = 'vehicle-photo';
const REPORT_LENS = 'vehicle-condition';

/**
 * The vehicle-condition stack, in the same shape as analyze: reserve the delta (photos already
 * described are reused) → one vendor call per new photo (bounded) and one synthesis over all
 * per-photo findings → persist findings and report and settle in one transaction. Every step is a
 * labelled activity, so an operator can follow a 50-photo report in the UI.
 */
export async function vehicleReportWorkflow(input: VehicleReportInput): Promise<VehicleReportResult> {
  const { workflowId, reservationId, saga, tally } = startSaga(input);
  const count = input.images.length;
  try {
    // 1. Which photos need describing, and the report's credit held.
    const plan = await dbSteps.reserveVehicleReport({
      reservationId,
      userId: input.userId,
      workflowId,
      ttlMs: input.reservationTtlMs,
      sha256s: input.images.map((i) => i.sha256),
      refresh: input.refresh,
      step: PHOTO_STEP,
      credits: VEHICLE_REPORT_CREDITS,
    });
    saga.add('release credits', () => dbSteps.releaseCredits({ id: reservationId, reason: 'vehicle report failed' }));
    const chain = vendorChain(plan.vendors, tally, { lane: input.lane, overflow: plan.overflow });

    // 2. One call per new photo (first copy only), then the synthesis over every photo's findings.
    const fellBack = new Set<Vendor>();
    const described = new Map<string, VendorCallResult>();
    const indexOf = (sha256: string) => input.images.findIndex((img) => img.sha256 === sha256);
    const describe = async (sha256: string, prepared?: PreparedUpload, ahead?: string) => {
      const index = indexOf(sha256);
      const { result, fellBackFrom } = await callWithFallback(
        chain,
        {
          userId: input.userId,
          sha256,
          task: { kind: 'vehicle-photo', photoIndex: index, photoCount: count },
          ...(input.context ? { context: input.context } : {}),
          ...hashesWanted(input.images[index]!),
          ...(prepared ? { prepared } : {}),
          ...(ahead !== undefined ? { ahead: { sha256: ahead, ...hashesWanted(input.images[indexOf(ahead)]!) } } : {}),
        },
        `vehicle photo ${index + 1}/${count} ${short(sha256)}`,
      );
      fellBackFrom.forEach((v) => fellBack.add(v));
      described.set(sha256, result);
      return result;
    };
    // Each call prepares the next photo while it waits for its answer. Patched: runs recorded
    // before describe their photos in the order they did.
    if (patched('vehicle-prepare-ahead')) await describeAhead(plan.todo, input.photoConcurrency, describe);
    else await mapBounded(plan.todo, input.photoConcurrency, (sha256) => describe(sha256));
    const findingsOf = (sha256: string) => described.get(sha256)?.outputs[PHOTO_STEP] ?? plan.known[sha256] ?? null;
    const synthesis = await callWithFallback(
      chain,
      {
        userId: input.userId,
        sha256: input.images[0]!.sha256,
        task: { kind: 'vehicle-report', findings: input.images.map((img, index) => ({ index, findings: findingsOf(img.sha256) })) },
        ...(input.context ? { context: input.context } : {}),
      },
      `vehicle report over ${count} photos`,
    );
    synthesis.fellBackFrom.forEach((v) => fellBack.add(v));
    const s = synthesis.result;
    const report = s.outputs[REPORT_LENS]!;
    const images = await withHashes(input.userId, input.images, [...described].map(([sha256, r]) => [sha256, r.hashes] as const));

    // 3. Findings, report and charge commit together.
    const { reportId } = await dbSteps.persistVehicleReport({
      workflowId,
      requestId: input.requestId,
      userId: input.userId,
      refresh: input.refresh,
      images: images.map((img, i) => {
        const done = plan.sources[i] === i ? described.get(img.sha256) : undefined;
        return {
          sha256: img.sha256,
          pHash: img.pHash,
          dHash: img.dHash,
          outputs: done?.outputs ?? {},
          versions: done?.versions ?? {},
          billed: [],
          lenses: done ? Object.keys(done.outputs) : [],
          provider: done?.provider ?? 'registry',
          vendor: done?.vendor ?? 'registry',
          model: done?.model ?? 'registry',
        };
      }),
      report: {
        setHash: input.setHash,
        sha256s: input.images.map((i) => i.sha256),
        output: report,
        version: s.versions[REPORT_LENS] ?? '0',
        provider: s.provider,
        vendor: s.vendor,
        model: s.model,
        credits: VEHICLE_REPORT_CREDITS,
      },
      reservationId,
    });

    const photoTokens = [...described.values()];
    return {
      workflowId,
      reportId,
      report,
      images: images.map((img) => ({ sha256: img.sha256, pHash: img.pHash, dHash: img.dHash })),
      creditsCharged: VEHICLE_REPORT_CREDITS,
      vendor: s.vendor,
      model: s.model,
      provider: s.provider,
      simulated: s.simulated,
      promptHash: s.promptHash,
      inputTokens: photoTokens.reduce((n, r) => n + r.inputTokens, s.inputTokens),
      outputTokens: photoTokens.reduce((n, r) => n + r.outputTokens, s.outputTokens),
      photosReused: new Set(input.images.map((i) => i.sha256)).size - plan.todo.length,
      fellBackFrom: [...fellBack],
    };
  } catch (err) {
    await saga.run(err);
    throw err;
  }
}

/**
 * The photos' calls, `lanes` at a time, like mapBounded, each call also preparing a photo that
 * will wait for a free lane (VendorCallInput `ahead`): a lane takes a photo whose upload is ready
 * first, so the photo's own call starts with its upload made instead of reading and decoding the
 * original first (docs/decisions.md, "A vehicle's next photo prepared during the call"). A photo
 * that an idle lane takes at once is not prepared ahead (that would decode it twice): the k-th
 * lane to start prepares the photo the lanes still to start will not take; a lane that finds only
 * photos being prepared ends, and the preparing calls' lanes take them. The first failure stops
 * new calls; the calls in flight are awaited, then it rejects.
 */
export async function describeAhead(
  todo: readonly string[],
  lanes: number,
  call: (sha256: string, prepared: PreparedUpload | undefined, ahead: string | undefined) => Promise<{ preparedAhead?: PreparedUpload }>,
): Promise<void> {
  const waiting = [...todo];
  const preparing = new Set<string>();
  const ready = new Map<string, PreparedUpload>();
  const laneCount = Math.min(Math.max(1, lanes), todo.length);
  let running = 0;
  let failure: { err: unknown } | null = null;
  const lane = async () => {
    while (failure === null && waiting.length) {
      // A photo prepared already, else one no call is preparing. Every photo left being prepared by
      // a call in flight: that call's lane takes it when it answers, and this lane ends.
      let k = waiting.findIndex((s) => ready.has(s));
      if (k < 0) k = waiting.findIndex((s) => !preparing.has(s));
      if (k < 0) return;
      const sha256 = waiting.splice(k, 1)[0]!;
      running += 1;
      // The lanes not running yet take the first photos nobody prepares: prepare the one after them.
      const next = waiting.filter((s) => !preparing.has(s) && !ready.has(s))[laneCount - running];
      if (next !== undefined) preparing.add(next);
      try {
        const result = await call(sha256, ready.get(sha256), next);
        if (next !== undefined && result.preparedAhead?.sha256 === next) ready.set(next, result.preparedAhead);
      } catch (err) {
        failure ??= { err };
      } finally {
        running -= 1;
        ready.delete(sha256);
        if (next !== undefined) preparing.delete(next);
      }
    }
  };
  await Promise.all(Array.from({ length: laneCount }, lane));
  if (failure !== null) throw (failure as { err: unknown }).err;
}
