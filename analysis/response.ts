import { randomBytes } from 'node:crypto';
import type { Analysis } from './contract.ts';
import type { PhotoRecord, LensOrigin } from '../registry/photos.ts';
import type { Vendor } from '../workflows/types.ts';

/** Version of the Analysis resource shape (opaque to clients, SPEC "Versioning" 3). */
export const SCHEMA_VERSION = '2.1.0';

export const newAnalysisId = () => `ana_${randomBytes(12).toString('hex')}`;

/** Flat output of one photo: every requested lens's fields, from the registry projection. */
export function photoOutput(photo: PhotoRecord, lenses: string[]): Record<string, unknown> {
  return lensOutput(lenses, (lens) => photo.lenses[lens]?.output);
}

/** Flat output of one photo: the fields of each lens in `lenses` order, from wherever `outputOf` finds them. */
export function lensOutput(lenses: string[], outputOf: (lens: string) => Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const lens of lenses) Object.assign(out, outputOf(lens) ?? {});
  return out;
}

export interface PerImage {
  sha256: string;
  pHash: string;
  dHash: string;
  output: Record<string, unknown>;
  cacheHit: boolean;
  creditsCharged: number;
  embedding?: number[];
}

/**
 * One image: its lens fields flat in `output`. Several (`images`): `output.images[i]` per image,
 * in request order, each with its own fields, sha256, cacheHit and creditsCharged.
 */
export function assembleOutput(perImage: PerImage[], multi: boolean, includeFingerprint: boolean, includeEmbedding: boolean): Record<string, unknown> {
  if (!multi) return perImage[0]!.output;
  return {
    images: perImage.map((p, index) => ({
      index,
      sha256: p.sha256,
      cacheHit: p.cacheHit,
      creditsCharged: p.creditsCharged,
      ...(includeFingerprint ? { fingerprint: { pHash: p.pHash, dHash: p.dHash, sha256: p.sha256 } } : {}),
      ...(includeEmbedding && p.embedding ? { embedding: p.embedding } : {}),
      ...p.output,
    })),
  };
}

/** The vendor/model to report when nothing ran: the origin of the newest cached record. */
export function originOf(photos: Array<PhotoRecord & { origins: Record<string, LensOrigin> }>, lenses: string[]): { vendor: Vendor; model: string; provider: string } | null {
  let best: { at: string; vendor: string; model: string; provider: string } | null = null;
  for (const p of photos) {
    for (const lens of lenses) {
      const rec = p.lenses[lens];
      const origin = p.origins[lens];
      if (rec && origin && (!best || rec.producedAt > best.at)) best = { at: rec.producedAt, ...origin, provider: rec.provider };
    }
  }
  if (!best || !['openai', 'anthropic', 'google'].includes(best.vendor)) return null;
  return { vendor: best.vendor as Vendor, model: best.model, provider: best.provider };
}

export function analysisEnvelope({ id, ...rest }: Omit<Analysis, 'object' | 'schemaVersion'>): Analysis {
  return { id, object: 'analysis', schemaVersion: SCHEMA_VERSION, ...rest };
}
