import type { components, paths } from './generated/lenstack.ts';

/**
 * Names for the shapes of the API, derived by path and method from the generated `paths` (the
 * document's operation ids may change; its paths are the contract), lens outputs from components.
 */
type Method = 'get' | 'post' | 'put' | 'delete';
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M & keyof paths[P]]>;
type JsonOf<R> = R extends { content: { 'application/json': infer J } } ? J : never;

/** The JSON of an operation's success answer (200, else 201, else 202). */
export type SuccessBody<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { responses: infer R }
    ? R extends { 200: infer S } ? JsonOf<S> : R extends { 201: infer S } ? JsonOf<S> : R extends { 202: infer S } ? JsonOf<S> : never
    : never;
/** The JSON body an operation takes. */
export type RequestBody<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
export type QueryOf<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

export type AnalyzeRequest = RequestBody<'/v1/analyze', 'post'>;
export type AnalyzeV2Request = RequestBody<'/v2/analyze', 'post'>;
export type Analysis = SuccessBody<'/v1/analyze', 'post'>;
export type LookupRequest = RequestBody<'/v2/lookup', 'post'>;
export type LookupQuery = QueryOf<'/v2/lookup', 'get'>;
export type Lookup = SuccessBody<'/v2/lookup', 'post'>;
export type ErasedPhoto = SuccessBody<'/v1/photos/{sha256}', 'delete'>;
export type LookupResult = Lookup['results'][string];
export type EnrichRequest = RequestBody<'/v2/enrich', 'post'>;
export type Enrichment = SuccessBody<'/v2/enrich', 'post'>;
export type Catalog = SuccessBody<'/v1/modules', 'get'>;
export type CreditBalance = SuccessBody<'/v1/usage', 'get'>;
export type Health = SuccessBody<'/v1/health', 'get'>;
/** The discovery index; a plain JSON object while the document gives its answer no schema. */
export type Discovery = OrObject<SuccessBody<'/.well-known/lenstack.json', 'get'>>;
type OrObject<T> = [T] extends [never] ? Record<string, unknown> : T;
export type BatchRequest = RequestBody<'/v1/batches', 'post'>;
export type Batch = SuccessBody<'/v1/batches', 'post'>;
export type BatchItemsPage = SuccessBody<'/v1/batches/{batchId}/items', 'get'>;
export type BatchItem = BatchItemsPage['items'][number];
export type BatchItemsQuery = QueryOf<'/v1/batches/{batchId}/items', 'get'>;
export type ExportFormat = 'xlsx' | 'csv' | 'json';

type Schemas = components['schemas'];
/** `output` of a one-photo analysis: every lens's fields, each present when its lens ran. */
export type PhotoOutput = Schemas['PhotoOutput'];
/** `output` of an analysis of several photos (`images`): one PhotoOutput per photo, plus its identity. */
export type MultiPhotoOutput = Schemas['MultiPhotoOutput'];
/** `output` of the vehicle-condition stack: the report. */
export type VehicleReportOutput = Schemas['VehicleReportOutput'];
/** The fields each lens adds to `output`, by lens name. */
export interface LensOutputs {
  dating: Schemas['DatingOutput'];
  people: Schemas['PeopleOutput'];
  location: Schemas['LocationOutput'];
  atmosphere: Schemas['AtmosphereOutput'];
  entities: Schemas['EntitiesOutput'];
  accessibility: Schemas['AccessibilityOutput'];
  'photo-quality': Schemas['PhotoQualityOutput'];
  'text-content': Schemas['TextContentOutput'];
  composition: Schemas['CompositionOutput'];
  moderation: Schemas['ModerationOutput'];
  describe: Schemas['DescribeOutput'];
  condition: Schemas['ConditionOutput'];
  authenticity: Schemas['AuthenticityOutput'];
  'color-palette': Schemas['ColorPaletteOutput'];
  automobile: Schemas['AutomobileOutput'];
  'vehicle-condition': Schemas['VehicleConditionOutput'];
}
/** Any lens, internal ones included (the keys of a photo record's lenses). */
export type AnyLensName = keyof LensOutputs;
/** A lens a request may name in `modules` and `modulesAdd` (GET /v1/modules). */
export type LensName = Schemas['LensName'];
/** A stack (curated lens set) a request may name in `preset`. */
export type StackName = Schemas['StackName'];
/** A code of the API's error envelope. */
export type ErrorCode = Schemas['ErrorCode'];
