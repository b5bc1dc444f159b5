/**
 * The SHA-256s a vehicle batch item names so far (`photos[].ref.sha256`; a photo item names one
 * in `ref`), as a jsonb array: the expression of the pending-photos index in db/migrations, so
 * write it exactly so where the index should serve. batches/repository.ts writes those columns; the registry reads them to decide whether
 * bytes may be deleted (photos.ts) and what an erasure must touch (erase.ts). The fragment lives
 * here, under both, so the batches module uses the very same one without the registry importing
 * it (docs/architecture.md, "Layers").
 */
export const VEHICLE_SHA256S = `jsonb_path_query_array(photos, '$[*].ref.sha256')`;
