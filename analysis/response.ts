import { randomBytes } from 'node:crypto';
import { VENDOR_NAMES } from '../core/vendor-names.ts';
import type { Analysis } from './contract.ts';
import type { PhotoRecord, LensOrigin } from '../registry/photos.ts';
import type { Vendor } from '../workflows/types.ts';

/** Version of the Analysis resource shape (opaque to clients, docs/contract.md "Versioning" 3). */
const SCHEMA_VERSION = '2.1.0';

const newAnalysisId = () => `ana_${randomBytes(12).toString('hex')}`;

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
  if (!best || !(VENDOR_NAMES as readonly string[]).includes(best.vendor)) return null;
  return { vendor: best.vendor as Vendor, model: best.model, provider: best.provider };
}

/** Everything an answer says, from wherever it came (the registry, a run, a report, the sandbox). */
export interface Answer {
  output: Record<string, unknown>;
  outputSchema: Analysis['outputSchema'];
  modulesUsed: string[];
  inputTokens: number;
  outputTokens: number;
  creditsCharged: number;
  warnings: string[];
  /** Who answered: meta.provider, meta.model, meta.vendor. */
  origin: { provider: string; model: string; vendor: Vendor };
  promptHash: string | null;
  cacheHit: boolean;
  requestId: string;
  /** performance.now() when the request arrived (meta.processingTimeMs), or a fixed time. */
  startedAt: number | { processingTimeMs: number };
  /** The first image's, when the caller asked for them. */
  fingerprint?: { pHash: string; dHash: string; sha256: string } | undefined;
  embedding?: number[] | undefined;
  /** Fixed id and time (the anonymous sandbox key's constant payload); new ones otherwise. */
  id?: string;
  createdAt?: string;
}

/** The Analysis resource: the one place its envelope is put together. */
export function buildAnalysis(a: Answer): Analysis {
  return {
    id: a.id ?? newAnalysisId(),
    object: 'analysis',
    schemaVersion: SCHEMA_VERSION,
    createdAt: a.createdAt ?? new Date().toISOString(),
    output: a.output,
    outputSchema: a.outputSchema,
    usage: {
      inputTokens: a.inputTokens,
      outputTokens: a.outputTokens,
      totalTokens: a.inputTokens + a.outputTokens,
      modulesUsed: a.modulesUsed,
      creditsCharged: a.creditsCharged,
    },
    warnings: a.warnings,
    meta: {
      processingTimeMs: typeof a.startedAt === 'number' ? Math.round(performance.now() - a.startedAt) : a.startedAt.processingTimeMs,
      provider: a.origin.provider,
      promptHash: a.promptHash,
      requestId: a.requestId,
      ai_generated: true,
      model: a.origin.model,
      vendor: a.origin.vendor,
      cacheHit: a.cacheHit,
    },
    ...(a.embedding ? { embedding: a.embedding } : {}),
    ...(a.fingerprint ? { fingerprint: a.fingerprint } : {}),
  };
}

/** The first image's fingerprint and embedding for the top level, when the caller asked for them. */
export function firstImageExtras(perImage: PerImage[], includeFingerprint: boolean, includeEmbedding: boolean): Pick<Answer, 'fingerprint' | 'embedding'> {
  const first = perImage[0]!;
  return {
    ...(includeEmbedding && first.embedding ? { embedding: first.embedding } : {}),
    ...(includeFingerprint ? { fingerprint: { pHash: first.pHash, dHash: first.dHash, sha256: first.sha256 } } : {}),
  };
}
