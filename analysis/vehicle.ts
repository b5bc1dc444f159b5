import { getLens } from '../lenses/index.ts';
import { findVehicleReport, vehicleSetHash } from '../registry/vehicle-reports.ts';
import { reindexReport } from '../lenses/vehicle-report-photos.ts';
import { analysisPersisted, getPhotos, recordCacheHit } from '../registry/photos.ts';
import type { Analysis, AnalyzeBody } from './contract.ts';
import { vehicleReportWorkflow } from '../workflows/vehicle-report.ts';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import type { ImageRef, Vendor, VehicleReportInput, VehicleReportResult } from '../workflows/types.ts';
import { AppError } from '../core/errors.ts';
import { interactiveTaskQueue } from '../core/config.ts';
import { buildAnalysis } from './response.ts';
import type { AnalyzeDeps } from './deps.ts';
import { startAndAwait } from './await-workflow.ts';
import type { Client } from '@temporalio/client';

/** Per-photo vendor calls in flight at once for one report. */
export const VEHICLE_PHOTO_CONCURRENCY = 16;
const LENSES = ['moderation', 'vehicle-condition'];

/**
 * The vehicle-condition stack: one report over all photos (`outputSchema: "vehicle"`). The same
 * photos with the same vehicle context are answered from the stored report for 0 credits.
 */
export async function vehicleAnalysis(
  deps: AnalyzeDeps & { temporal: Client },
  accountId: string,
  body: AnalyzeBody,
  refs: ImageRef[],
  requestId: string,
  startedAt: number,
  warnings: string[],
): Promise<Analysis> {
  const shas = refs.map((r) => r.sha256);
  const setHash = vehicleSetHash({ sha256s: shas, vehicle: body.context?.vehicle, version: getLens('vehicle-condition').version });
  const includeFingerprint = body.options?.includeFingerprint === true;

  // A retry of a finished request (same x-request-id) attaches to its run: that report was paid
  // for. Its run row is asked after the report is found, never before: the run commits both at
  // once, so a report found here that this request's own run made is seen as its run
  // (analysis/cache-hit.ts says why the order matters).
  if (!body.refresh) {
    const cached = await findVehicleReport(deps.db, accountId, setHash);
    if (cached && !(await analysisPersisted(deps.db, `vehicle:${accountId}:${requestId}`))) {
      await recordCacheHit(deps.db, accountId, shas);
      const photos = await getPhotos(deps.db, accountId, [shas[0]!]);
      const first = photos.get(shas[0]!);
      return buildAnalysis({
        // The same photos in another order: the report's positions become this request's.
        output: { reportId: cached.id, ...reindexReport(cached.output, cached.sha256s, shas) },
        outputSchema: 'vehicle',
        modulesUsed: LENSES,
        inputTokens: 0,
        outputTokens: 0,
        creditsCharged: 0,
        warnings,
        origin: { provider: cached.provider, model: cached.model, vendor: cached.vendor as Vendor },
        promptHash: null,
        cacheHit: true,
        requestId,
        startedAt,
        ...(includeFingerprint && first ? { fingerprint: { pHash: first.pHash, dHash: first.dHash, sha256: first.sha256 } } : {}),
      });
    }
  }

  const input: VehicleReportInput = {
    requestId,
    userId: accountId,
    images: refs,
    ...(body.context ? { context: body.context } : {}),
    refresh: body.refresh,
    reservationTtlMs: deps.config.RESERVATION_TTL_MS,
    photoConcurrency: VEHICLE_PHOTO_CONCURRENCY,
    setHash,
  };
  const workflowId = `vehicle:${accountId}:${requestId}`;
  const result = await startAndAwait<VehicleReportResult>(deps, 'vehicle', workflowId, () =>
    deps.temporal.workflow.start(vehicleReportWorkflow, {
      // Ahead of batch work: its own queue and worker slots (docs/decisions.md, "Interactive work ahead of batches").
      taskQueue: interactiveTaskQueue(deps.config),
      workflowId,
      args: [input],
      workflowExecutionTimeout: deps.config.WORKFLOW_TIMEOUT_MS,
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.userId, value: accountId },
        { key: SEARCH_ATTRIBUTES.requestId, value: requestId },
        { key: SEARCH_ATTRIBUTES.stack, value: 'vehicle-condition' },
        { key: SEARCH_ATTRIBUTES.imageCount, value: refs.length },
      ],
    }),
  );
  if (result.fellBackFrom.length) warnings.push(`${result.fellBackFrom.join(', ')} failed on some calls; others answered`);
  if (result.simulated) warnings.push('simulated: answered by the Lenstack vendor simulator, not a real AI model (no vendor API key configured)');
  if (result.photosReused) warnings.push(`${result.photosReused} photo(s) already described in an earlier report were reused, not sent again`);
  const first = result.images[0]!;
  return buildAnalysis({
    output: { reportId: result.reportId, ...result.report },
    outputSchema: 'vehicle',
    modulesUsed: LENSES,
    inputTokens: result.inputTokens,
    outputTokens: result.outputTokens,
    creditsCharged: result.creditsCharged,
    warnings,
    origin: { provider: result.provider, model: result.model, vendor: result.vendor },
    promptHash: result.promptHash,
    cacheHit: false,
    requestId,
    startedAt,
    ...(includeFingerprint ? { fingerprint: { pHash: first.pHash, dHash: first.dHash, sha256: first.sha256 } } : {}),
  });
}
