import type { Principal } from '../auth/authenticate.ts';
import { getBespokeSchema } from '../bespoke/repository.ts';
import { bespokeSchemaInput, checkBespokeSchema, type BespokeSchema } from '../bespoke/schema.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import { resolveLenses } from '../lenses/resolve.ts';
import type { AnalyzeInput } from '../workflows/types.ts';
import type { FinishedUpload } from '../uploads/service.ts';
import type { AnalyzeBody } from './contract.ts';

/**
 * An analyze request, checked and resolved before anything is stored, bound or billed: its image
 * inputs, its lenses, its extraction. Every refusal here is a 4xx that changes nothing.
 */
export interface AnalysisRequest {
  body: AnalyzeBody;
  inputs: ImageInput[];
  /** Sent as `images` (the output lists each image) rather than one imageUrl/imageBase64. */
  multi: boolean;
  resolved: ReturnType<typeof resolveLenses>;
  lenses: string[];
  warnings: string[];
  includeFingerprint: boolean;
  includeEmbedding: boolean;
  /** `extract` as the caller sent it, checked. */
  extract: ExtractRequest | undefined;
  /** `extract` as the workflow runs it: a saved schema is read (live keys only). */
  extractInput: AnalyzeInput['extract'];
}

export type ImageInput = { url?: string; base64?: string; uploadId?: string; upload?: FinishedUpload };

export type ExtractRequest = NonNullable<AnalyzeBody['extract']>;

/** docs/contract.md, analyze rule 1: exactly one input style; each item must carry an image. */
export function imageInputs(body: AnalyzeBody): { inputs: ImageInput[]; multi: boolean } {
  const single = body.imageUrl !== undefined || body.imageBase64 !== undefined;
  if (single && body.images) throw validationFailed('body: use either imageUrl/imageBase64 or images, not both');
  if (body.imageUrl !== undefined && body.imageBase64 !== undefined) throw validationFailed('body: use either imageUrl or imageBase64, not both');
  if (single) return { inputs: [body.imageUrl !== undefined ? { url: body.imageUrl } : { base64: body.imageBase64! }], multi: false };
  if (!body.images) throw validationFailed('body: an image is required (imageUrl, imageBase64 or images)');
  const inputs = body.images.map((item, i) => {
    if (item.uploadId !== undefined) {
      if (item.base64 !== undefined || item.url !== undefined) throw validationFailed(`body.images.${i}: an item with uploadId carries no url or base64`);
      return { uploadId: item.uploadId };
    }
    // An item may carry both; the bytes we were given win over a fetch.
    if (item.base64 !== undefined) return { base64: item.base64 };
    if (item.url !== undefined) return { url: item.url };
    throw validationFailed(`body.images.${i}: each item needs url, base64 or uploadId`);
  });
  return { inputs, multi: true };
}

export async function parseRequest(db: Db, principal: Principal, body: AnalyzeBody): Promise<AnalysisRequest> {
  const { inputs, multi } = imageInputs(body);
  const resolved = resolveLenses({
    preset: body.preset,
    modules: body.modules,
    modulesAdd: body.modulesAdd,
    modulesRemove: body.modulesRemove,
    moduleOptions: body.moduleOptions,
  });
  const extract = checkExtract(body.extract);
  const request: AnalysisRequest = {
    body,
    inputs,
    multi,
    resolved,
    lenses: resolved.lenses,
    warnings: [...resolved.warnings],
    includeFingerprint: body.options?.includeFingerprint === true,
    includeEmbedding: body.options?.includeEmbedding === true,
    extract,
    extractInput: undefined,
  };
  if (principal.sandbox || !extract) return request;
  if (resolved.outputSchema === 'vehicle') throw validationFailed('body.extract: not available with the vehicle-condition stack');
  // A saved schema is the caller's own: unknown or another account's id is 404 before anything moves.
  if (extract.schemaId !== undefined) {
    const saved = await getBespokeSchema(db, principal.accountId!, extract.schemaId);
    if (!saved) throw new AppError('SCHEMA_NOT_FOUND', `No saved schema ${extract.schemaId} for this account`);
    request.extractInput = { schemaId: extract.schemaId, schema: saved as unknown as Record<string, unknown> };
  } else if (extract.schema !== undefined) {
    request.extractInput = { schema: extract.schema as unknown as Record<string, unknown> };
  } else {
    request.extractInput = { prompt: extract.prompt! };
  }
  return request;
}

/** docs/contract.md (/v2/analyze): exactly one of prompt, schema, schemaId; an inline schema within our limits. */
function checkExtract(extract: AnalyzeBody['extract']): ExtractRequest | undefined {
  if (!extract) return undefined;
  const given = [extract.prompt, extract.schema, extract.schemaId].filter((v) => v !== undefined).length;
  if (given !== 1) throw validationFailed('body.extract: provide exactly one of prompt, schema or schemaId');
  if (extract.schema) {
    const parsed = bespokeSchemaInput.safeParse(extract.schema);
    if (!parsed.success) {
      throw validationFailed(parsed.error.issues.slice(0, 5).map((i) => `body.extract.schema.${i.path.join('.')}: ${i.message}`).join('; '));
    }
    const problems = checkBespokeSchema(parsed.data as BespokeSchema);
    if (problems.length) throw validationFailed(`body.${problems.join('; body.')}`);
    return { ...extract, schema: parsed.data };
  }
  return extract;
}
