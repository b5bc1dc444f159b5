import { mapBounded } from '../core/map-bounded.ts';
import { intakeImage } from '../images/intake.ts';
import { intakeDepsFor, refOf, takeUpload } from '../registry/intake.ts';
import type { ImageRef } from '../workflows/types.ts';
import type { AnalysisRequest } from './request.ts';
import type { Progress } from './progress.ts';
import type { AnalyzeDeps } from './deps.ts';

/** Images taken in at once per request (each is a fetch or a base64 decode, a decode and a write). */
const INTAKE_CONCURRENCY = 4;

export interface TakenImages {
  refs: ImageRef[];
  /** By SHA-256, when the caller asked for embeddings: made by intake's one decode. */
  embeddings: Map<string, number[]>;
  /** False when a photo is known to be new to the caller's registry (then nothing can be a cache hit). */
  allRegistered: boolean;
}

/** Take the request's images in (images/intake.ts); every blob written is noted in `progress`. */
export async function takeImages(deps: AnalyzeDeps, accountId: string, request: AnalysisRequest, progress: Progress): Promise<TakenImages> {
  const embeddings = new Map<string, number[]>();
  let allRegistered = true;
  const refs = await mapBounded(request.inputs, INTAKE_CONCURRENCY, async (input): Promise<ImageRef> => {
    const taking = intakeDepsFor(deps, accountId, progress.holder);
    // An upload's bytes are in the blob store already (stored once, when it finished): nothing to
    // read unless the embedding needs a decode here.
    const img = input.upload && !request.includeEmbedding
      ? await takeUpload(taking, input.upload)
      : await intakeImage(input.upload ? { bytes: await deps.uploads!.bytes(input.upload) } : input, taking, { embedding: request.includeEmbedding, ...(deps.signal ? { signal: deps.signal } : {}) });
    if (img.stored) progress.stored.push(img.sha256);
    if (img.embedding) embeddings.set(img.sha256, img.embedding);
    if (img.registered === false) allRegistered = false;
    return refOf(img);
  });
  return { refs, embeddings, allRegistered };
}

/** The local visual embedding of each image, from intake. */
export function embeddingOf(taken: TakenImages, sha256: string): number[] {
  const embedding = taken.embeddings.get(sha256);
  if (!embedding) throw new Error(`no embedding was made for ${sha256} at intake`);
  return embedding;
}
