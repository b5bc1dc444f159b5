import { VENDOR_NAMES } from '../core/vendor-names.ts';
import { analysisPersisted, getPhotos, recordCacheHit } from '../registry/photos.ts';
import type { Analysis } from './contract.ts';
import { embeddingOf, type TakenImages } from './intake.ts';
import type { AnalysisRequest } from './request.ts';
import { assembleOutput, buildAnalysis, firstImageExtras, originOf, photoOutput, type PerImage } from './response.ts';
import type { AnalyzeDeps } from './deps.ts';

/**
 * A full cache hit: every requested lens of every photo is in the caller's registry, so the answer
 * needs no vendor, no credits and no workflow. Null when anything is missing. Extraction always
 * runs (it bypasses the projection), so it never hits. A request whose own workflow already ran
 * (a client retrying with its x-request-id) would hit the very records it paid for: it attaches
 * to that run instead and gets its answer and charge.
 */
export async function answerFromRegistry(
  deps: AnalyzeDeps,
  accountId: string,
  request: AnalysisRequest,
  taken: TakenImages,
  requestId: string,
  startedAt: number,
): Promise<Analysis | null> {
  // Intake already knows when a photo is new to the caller's registry: then nothing can hit.
  if (request.body.refresh || request.extractInput || !taken.allRegistered) return null;
  const { lenses } = request;
  const shas = taken.refs.map((r) => r.sha256);
  const photos = await getPhotos(deps.db, accountId, [...new Set(shas)]);
  const complete = shas.every((s) => lenses.every((l) => photos.get(s)?.lenses[l]));
  if (!complete) return null;
  // Asked after the records were read, never beside them: a run of this request id that recorded
  // them commits its run row in the same transaction, so it is seen here. Asked at once (as it
  // was), the run row could be read just before that commit and the records just after: a resend
  // answered as a free cache hit of the lenses its own first run was charged for (the chaos suite:
  // "told 0, ledger settled 2").
  if (await analysisPersisted(deps.db, `analyze:${accountId}:${requestId}`)) return null;
  await recordCacheHit(deps.db, accountId, shas);
  const list = shas.map((s) => photos.get(s)!);
  const perImage: PerImage[] = list.map((p) => ({
    sha256: p.sha256,
    pHash: p.pHash,
    dHash: p.dHash,
    output: photoOutput(p, lenses),
    cacheHit: true,
    creditsCharged: 0,
    ...(request.includeEmbedding ? { embedding: embeddingOf(taken, p.sha256) } : {}),
  }));
  const origin = originOf(list, lenses);
  return buildAnalysis({
    output: assembleOutput(perImage, request.multi, request.includeFingerprint, request.includeEmbedding),
    outputSchema: request.resolved.outputSchema,
    modulesUsed: lenses,
    inputTokens: 0,
    outputTokens: 0,
    creditsCharged: 0,
    warnings: request.warnings,
    origin: origin ?? { provider: 'registry', model: 'registry', vendor: deps.config.VENDOR_ORDER[0] ?? VENDOR_NAMES[0] },
    promptHash: null,
    cacheHit: true,
    requestId,
    startedAt,
    ...firstImageExtras(perImage, request.includeFingerprint, request.includeEmbedding),
  });
}
