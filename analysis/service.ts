import type { Principal } from '../auth/authenticate.ts';
import { AppError } from '../core/errors.ts';
import { releaseLeases } from '../registry/blob-leases.ts';
import { deleteUnreferencedBlobs } from '../registry/photos.ts';
import { answerFromRegistry } from './cache-hit.ts';
import type { AnalyzeDeps } from './deps.ts';
import type { Analysis, AnalyzeBody } from './contract.ts';
import { takeImages } from './intake.ts';
import { newProgress, untilEnded, type Progress } from './progress.ts';
import { answeredById, bindRequest, requestFingerprint, storeAnswer, unbindRequest, type Binding } from './request-binding.ts';
import { parseRequest, type ImageInput } from './request.ts';
import { runAnalysis } from './run.ts';
import { sandboxAnalysis } from './sandbox.ts';
import { vehicleAnalysis } from './vehicle.ts';


export type { AnalyzeDeps } from './deps.ts';

/**
 * The uploads a request names, resolved before anything is bound, stored or billed: another
 * account's or an unknown id is 404, an expired one 404 saying it expired (uploads/service.ts). Returns their ids.
 */
export async function resolveUploadInputs(deps: Pick<AnalyzeDeps, 'uploads'>, accountId: string | null, inputs: ImageInput[], field: string | ((i: number) => string)): Promise<string[]> {
  const at = (i: number) => (typeof field === 'string' ? `${field}.${i}` : field(i));
  const refs = inputs.flatMap((input, i) => (input.uploadId !== undefined ? [{ id: input.uploadId, at: `${at(i)}.uploadId`, input }] : []));
  if (!refs.length) return [];
  if (!deps.uploads || accountId === null) throw new AppError('NOT_FOUND', `${refs[0]!.at}: no upload ${JSON.stringify(refs[0]!.id.slice(0, 100))} for this key (the anonymous sandbox key holds none)`);
  const found = await deps.uploads.resolve(accountId, refs);
  refs.forEach((r, k) => (r.input.upload = found[k]));
  return refs.map((r) => r.id);
}

/**
 * POST /v1/analyze and /v2/analyze, as one story: check the request → bind its x-request-id
 * while its images are taken in → answer from the registry when every lens is there → else run
 * the saga (or the vehicle report) → keep the answer under the request id. A request that fails
 * gives its request id back when nothing ran under it, and keeps none of the images it brought.
 */
export async function analyze(deps: AnalyzeDeps, principal: Principal, body: AnalyzeBody, requestId: string, startedAt: number): Promise<Analysis> {
  const request = await parseRequest(deps.db, principal, body);
  // An idempotent resend of an answered request that named uploads gets its stored answer even
  // when an upload was deleted or expired since: the binding is looked up before the uploads.
  const namesUploads = request.inputs.some((input) => input.uploadId !== undefined);
  const hashById = namesUploads ? requestFingerprint(body) : undefined;
  if (hashById && !principal.sandbox && principal.accountId) {
    const earlier = await answeredById<Analysis>(deps.db, { accountId: principal.accountId, requestId, hashById });
    if (earlier) return earlier;
  }
  const uploadIds = await resolveUploadInputs(deps, principal.accountId, request.inputs, 'body.images');
  if (principal.sandbox) return sandboxAnalysis(deps, principal, request, requestId, startedAt);
  const pipeline = deps;
  const accountId = principal.accountId!;
  const progress = newProgress();
  let binding: Binding<Analysis> | undefined;
  try {
    // The request id is bound while the images are read, decoded and stored: neither waits for the other.
    const [bound, taken] = await Promise.allSettled([
      bindRequest<Analysis>(deps.db, { accountId, requestId, hash: requestFingerprint(sameBytesSameRequest(body, request.inputs)), ...(hashById ? { hashById } : {}) }),
      takeImages(deps, accountId, request, progress),
    ]);
    if (bound.status === 'rejected') throw bound.reason;
    binding = bound.value;
    if (binding.kind === 'answered') {
      await forgetImages(deps, progress);
      return binding.response;
    }
    if (taken.status === 'rejected') throw taken.reason;
    const answer = request.resolved.outputSchema === 'vehicle'
      ? await untilEnded(progress, () => vehicleAnalysis(pipeline, accountId, body, taken.value.refs, requestId, startedAt, request.warnings))
      : ((await answerFromRegistry(deps, accountId, request, taken.value, requestId, startedAt)) ??
        (await runAnalysis(pipeline, accountId, request, taken.value, requestId, startedAt, progress)));
    // The answer kept under the request id; the registry holds the photos now, so the request's
    // intake leases have done their work; its uploads were used. Three writes, asked at once.
    await Promise.all([
      storeAnswer(deps.db, { accountId, requestId, response: answer }),
      releaseLeases(deps.db, progress.holder),
      deps.uploads?.touch(accountId, uploadIds),
    ]);
    return answer;
  } catch (err) {
    // Refused before any workflow started (bad image, no credits): nothing ran under this id, so
    // it is free again for a corrected request.
    if (!progress.started && binding?.kind === 'new') await unbindRequest(deps.db, { accountId, requestId });
    // A failed request keeps no image it brought: nobody pays for storing it. A workflow that may
    // still run (the wait was abandoned) keeps its images, and its leases until they expire; the
    // blob collector takes them later.
    if (!progress.started || progress.ended) await forgetImages(deps, progress);
    throw err;
  }
}

/**
 * The body as its request id binds it: an upload stands for its bytes (SHA-256), so the same photos
 * resent under the same id are the same request whatever upload carried them (a multipart resend
 * makes new uploads).
 */
function sameBytesSameRequest(body: AnalyzeBody, inputs: ImageInput[]): AnalyzeBody {
  if (!body.images || !inputs.some((input) => input.upload)) return body;
  return { ...body, images: body.images.map((item, i) => (inputs[i]?.upload ? { uploadId: `sha256:${inputs[i].upload.sha256}` } : item)) };
}

/**
 * End this request's intake leases and delete the blobs it wrote that nothing else holds: a
 * registry, an upload, a batch, or another request's lease on bytes its intake found stored
 * (registry/blob-leases.ts).
 */
async function forgetImages(deps: AnalyzeDeps, progress: Progress): Promise<void> {
  await releaseLeases(deps.db, progress.holder);
  await deleteUnreferencedBlobs(deps.db, deps.blobs, progress.stored);
}
