/** Inputs and results of AnalyzeWorkflow. Pure types: safe to import from workflow code. */
/** A vendor's name: the list is core/vendor-names.ts (no code of its own, safe in the workflow sandbox). */
import type { VendorName } from '../core/vendor-names.ts';
export type Vendor = VendorName;

export interface AnalyzeContext {
  knownPeople?: Array<{ name: string; birthYear?: number; deathYear?: number; role?: string }>;
  vehicle?: { vin?: string; mileage?: number; year?: number; make?: string; model?: string };
  customInstructions?: string;
}

export interface ImageRef {
  sha256: string;
  format: string;
  width: number;
  height: number;
  /**
   * Perceptual hashes, when already known: from the caller's registry, or from intake's decode when
   * it made one (an embedding was asked for). Null until the worker's one decode of the photo makes
   * them, after the reservation (docs/decisions.md, "Decoding after the reservation").
   */
  pHash: string | null;
  dHash: string | null;
}

/** A photo's perceptual hashes (images/fingerprint.ts). */
export interface PhotoHashes {
  pHash: string;
  dHash: string;
}

/** An image whose hashes are known: what persisting and the answer need. */
export type HashedRef = ImageRef & PhotoHashes;

export interface AnalyzeInput {
  requestId: string;
  userId: string;
  stack: string | null;
  images: ImageRef[];
  /** Resolved lenses (moderation included). */
  lenses: string[];
  /** The subset of `lenses` that costs a credit per image. */
  billable: string[];
  refresh: boolean;
  context?: AnalyzeContext;
  moduleOptions?: Record<string, Record<string, unknown>>;
  /** How long the credit reservation may stay open before the sweeper releases it. */
  reservationTtlMs: number;
  /** At most this many images are sent to vendors at once. */
  imageConcurrency: number;
  /** 'batch' for a batch's photos; absent = interactive. */
  lane?: Lane;
  /**
   * Bespoke extraction (v2): exactly one of a saved schema (id + its schema, checked by the API), an
   * inline schema, or a prompt the vendor drafts a schema from. Always bills BESPOKE_CREDITS.
   */
  extract?: { schemaId?: string; schema?: Record<string, unknown>; prompt?: string };
}


/** Bespoke extraction riding along an image's vendor call (docs/contract.md, /v2/analyze `extract`). */
export interface BespokeTask {
  /** The caller's schema (validated; bespoke/schema.ts BespokeSchema). */
  schema: Record<string, unknown>;
  /** The caller's natural-language request, when the schema was drafted from one. */
  prompt?: string;
}

/** What one vendor call is asked to do. */
export type VendorTask =
  | { kind: 'lenses'; lenses: string[]; bespoke?: BespokeTask }
  | { kind: 'draft-schema'; prompt: string }
  | { kind: 'vehicle-photo'; photoIndex: number; photoCount: number }
  | { kind: 'vehicle-report'; findings: Array<{ index: number; findings: Record<string, unknown> | null }> };

export interface VendorCallInput {
  userId: string;
  sha256: string;
  task: VendorTask;
  /** The stack the request named (AnalyzeInput.stack), for the token metrics' label; absent = none. */
  stack?: string;
  context?: AnalyzeContext;
  moduleOptions?: Record<string, Record<string, unknown>>;
  /** Absent = interactive (docs/decisions.md, "Vendor quotas"). */
  lane?: Lane;
  /** VENDOR_OVERFLOW: give up on a budget wait that cannot end in time at once, for the next vendor. */
  overflow?: boolean;
  /** Also make the photo's perceptual hashes, from the same read of its bytes as the work copy. */
  fingerprint?: boolean;
  /**
   * The next photo of the same chain, prepared for this vendor while this call waits for its
   * answer (its upload stored; `fingerprint`: its hashes made too). The result's `preparedAhead`
   * hands it to the photo's own call (docs/decisions.md, "A vehicle's next photo prepared during
   * the call").
   */
  ahead?: { sha256: string; fingerprint?: boolean };
  /** This photo's upload, prepared during an earlier call; used when it was made for this vendor. */
  prepared?: PreparedUpload;
}

/** A photo's vendor upload made ahead of its call and kept in the blob store under its own hash. */
export interface PreparedUpload {
  /** The original photo's SHA-256. */
  sha256: string;
  /** The vendor it was sized for (each vendor bills its own size). */
  vendor: Vendor;
  /** The upload's JPEG bytes' SHA-256: its key in the blob store. */
  blob: string;
  width: number;
  height: number;
  /** Image tokens the vendor bills for it. */
  tokens: number;
  /** The original's upright size. */
  source: { width: number; height: number };
  /** The photo's perceptual hashes, when they were asked for. */
  hashes?: PhotoHashes;
}

export interface VendorCallResult {
  /** Lens (or step) name → validated output. */
  outputs: Record<string, Record<string, unknown>>;
  /** Bespoke extraction answer ('lenses' with bespoke) or the drafted schema ('draft-schema'). */
  data?: Record<string, unknown>;
  versions: Record<string, string>;
  vendor: Vendor;
  model: string;
  provider: string;
  simulated: boolean;
  promptHash: string;
  inputTokens: number;
  outputTokens: number;
  /** The photo's perceptual hashes, when the call was asked for them (`fingerprint`). */
  hashes?: PhotoHashes;
  /** The `ahead` photo's upload, when it was prepared in time (absent when it failed: its own call decodes it). */
  preparedAhead?: PreparedUpload;
}

export interface ImageResult {
  sha256: string;
  pHash: string;
  dHash: string;
  /** Lenses sent to a vendor in this run. */
  ran: string[];
  /** Lenses of `ran` that were billed. */
  billed: string[];
  credits: number;
  vendor: Vendor | null;
  model: string | null;
  provider: string | null;
  simulated: boolean;
  promptHash: string | null;
  inputTokens: number;
  outputTokens: number;
  /** Vendors that failed before one answered (for warnings). */
  fellBackFrom: Vendor[];
  /** Bespoke extraction answer for this image (v2 `extract`). */
  bespoke?: Record<string, unknown>;
  /**
   * Lens → output this run recorded for the photo (a repeat copy: its first copy's). Lenses it
   * did not run are the registry's.
   */
  outputs: Record<string, Record<string, unknown>>;
}

export interface AnalyzeResult {
  workflowId: string;
  images: ImageResult[];
  creditsCharged: number;
  /** The saved schema used for `extract` (every schema used is saved). */
  bespokeSchemaId?: string;
}

/** Error types (ApplicationFailure.type) that cross the workflow boundary. */
export const VENDOR_REJECTED = 'VENDOR_REJECTED';
export const VENDOR_INVALID_OUTPUT = 'VENDOR_INVALID_OUTPUT';
export const VENDOR_NOT_CONFIGURED = 'VENDOR_NOT_CONFIGURED';
/** The attempt waited its share of time for the vendor's budget and got no slot: no call was made. */
export const VENDOR_QUOTA = 'VENDOR_QUOTA';

/** Whose work a vendor call is: a batch's calls leave interactive ones a reserve of the vendor budget. */
export type Lane = 'interactive' | 'batch';

/** The vehicle-condition stack: one report over many photos of one vehicle. */
export interface VehicleReportInput {
  requestId: string;
  userId: string;
  images: ImageRef[];
  context?: AnalyzeContext;
  refresh: boolean;
  reservationTtlMs: number;
  /** Per-photo vendor calls in flight at once. */
  photoConcurrency: number;
  /** vehicleSetHash of the photos and vehicle context (report reuse key). */
  setHash: string;
  /** 'batch' for a batch's vehicles; absent = interactive. */
  lane?: Lane;
}

export interface VehicleReportResult {
  workflowId: string;
  reportId: string;
  report: Record<string, unknown>;
  images: Array<{ sha256: string; pHash: string; dHash: string }>;
  creditsCharged: number;
  vendor: Vendor;
  model: string;
  provider: string;
  simulated: boolean;
  promptHash: string;
  inputTokens: number;
  outputTokens: number;
  /** Per-photo steps answered from earlier runs (the registry), not sent again. */
  photosReused: number;
  fellBackFrom: Vendor[];
}


/**
 * One image as a run persists it (registry/photos.ts persistAnalysisIn adds which lenses ran
 * together): the workflow builds it, the persist step writes it.
 */
export interface PersistedImage {
  sha256: string;
  pHash: string;
  dHash: string;
  /** Lens name → validated output of this run (empty when everything was cached). */
  outputs: Record<string, Record<string, unknown>>;
  versions: Record<string, string>;
  /** Lenses of `outputs` that were billed (1 credit each). */
  billed: string[];
  /** The lenses that ran together in this image's vendor call. */
  lenses: string[];
  provider: string;
  vendor: string;
  model: string;
}

/** A batch item's end: its charge (and report), or why it failed. batches/repository.ts records it. */
export type ItemOutcome = { credits: number; reportId?: string } | { code: string; message: string };

/** What a batch item holds before anything is fetched for it (activities/batch.ts). */
export interface ItemHold {
  reservationId: string;
  workflowId: string;
  userId: string;
  amount: number;
  ttlMs: number;
}

/**
 * How long a vehicle of an awaitUploads batch waits, from its turn, for uploads still arriving, when
 * its batch's input does not say (BATCH_UPLOAD_WAIT_MS; runs started before it).
 */
export const UPLOAD_WAIT_MS = 10 * 60_000;
