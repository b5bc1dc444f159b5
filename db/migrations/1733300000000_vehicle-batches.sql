-- Up Migration

-- Vehicle batches: a batch whose items are vehicles, each 1 to 50 photos with its own vehicle
-- context, each giving one vehicle-condition report (workflows/vehicle-report.ts).
ALTER TABLE batches ADD COLUMN kind text NOT NULL DEFAULT 'photos' CHECK (kind IN ('photos', 'vehicles'));

-- A vehicle item's photos in submission order, each {source, url?, ref?} like a photo item's
-- columns; `vehicle` the group's own vehicle context; `report_id` the report it gave. The hashes
-- of its photos taken in are kept while it is pending, as `ref` is for a photo: the index is over
-- them as the photos hold them (batches/repository.ts VEHICLE_SHA256S), not over a second copy.
ALTER TABLE batch_items
  ADD COLUMN photos jsonb,
  ADD COLUMN vehicle jsonb,
  ADD COLUMN report_id text;
CREATE INDEX batch_items_pending_photo_sha256s ON batch_items USING gin (jsonb_path_query_array(photos, '$[*].ref.sha256')) WHERE status = 'pending';

-- Down Migration
DROP INDEX batch_items_pending_photo_sha256s;
ALTER TABLE batch_items DROP COLUMN photos, DROP COLUMN vehicle, DROP COLUMN report_id;
ALTER TABLE batches DROP COLUMN kind;
