import { readFileSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parse } from 'csv-parse/sync';
import { CliError, EXIT } from './exit-codes.ts';
import { collectPhotos, PHOTO_EXTENSIONS, type FoundPhoto } from './files.ts';

/** The API's bounds of a vehicle batch (openapi/lenstack.json BatchRequest `vehicles`). */
export const MAX_VEHICLE_PHOTOS = 50;
export const MAX_VEHICLES = 1000;
export const MAX_BATCH_PHOTOS = 10_000;
export const MANIFEST_NAME = 'vehicles.csv';

export interface VehicleContext {
  vin?: string;
  mileage?: number;
  make?: string;
  model?: string;
  year?: number;
}

export interface PlannedVehicle {
  /** The sub-folder's name: the vehicle's name in the batch and its export. */
  folder: string;
  vehicle: VehicleContext;
  photos: FoundPhoto[];
}

const COLUMNS = ['folder', 'vin', 'mileage', 'make', 'model', 'year'] as const;
/** ISO 3779: 17 characters, digits and capitals without I, O and Q (read as 1 and 0). */
const VIN = /^[A-HJ-NPR-Z0-9]{17}$/;
/** Control and format characters (line breaks, tabs, bidi overrides) have no place in a field. */
const CONTROL = /[\p{Cc}\p{Cf}]/u;

/**
 * A fleet folder as vehicles: each sub-folder (hidden ones skipped) is a vehicle, its photos those
 * found in it (its own sub-folders included); `vehicles.csv` in the folder, or `manifest`, gives
 * each folder its VIN, mileage, make, model and year. Every problem is found before anything is
 * read or uploaded and all are reported at once (exit 2): a vehicle over 50 photos, a folder with
 * no photos, a manifest row naming a folder that is not there or a bad value, photos lying
 * directly in the fleet folder (they belong to no vehicle).
 */
export async function planVehicles(root: string, manifestPath: string | undefined): Promise<PlannedVehicle[]> {
  const info = await stat(root).catch(() => null);
  if (!info?.isDirectory()) throw new CliError(`--vehicles needs a folder with one sub-folder per vehicle; ${root} is not a folder`, EXIT.USAGE);
  const problems: string[] = [];
  const entries = await readdir(root, { withFileTypes: true });
  const folders = entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name).sort();
  const loose = entries.filter((e) => !e.isDirectory() && PHOTO_EXTENSIONS.test(e.name) && !e.name.startsWith('.')).map((e) => e.name);
  if (loose.length) problems.push(`${loose.length} photo${loose.length === 1 ? '' : 's'} directly in ${root} belong to no vehicle (${preview(loose)}): put each vehicle's photos in a sub-folder of its own`);

  const defaultManifest = join(root, MANIFEST_NAME);
  const manifestFile = manifestPath ?? (entries.some((e) => e.isFile() && e.name === MANIFEST_NAME) ? defaultManifest : undefined);
  const contexts = manifestFile ? readManifest(manifestFile, new Set(folders), problems) : new Map<string, VehicleContext>();

  if (folders.length === 0) problems.push(`no vehicle folders in ${root}: each vehicle's photos go in a sub-folder of their own`);
  if (folders.length > MAX_VEHICLES) problems.push(`${folders.length} vehicle folders: a batch takes at most ${MAX_VEHICLES} vehicles`);
  const vehicles: PlannedVehicle[] = [];
  let photoCount = 0;
  for (const folder of folders) {
    const photos = await collectPhotos([join(root, folder)]).catch((err: unknown) => {
      if (err instanceof CliError) return [];
      throw err;
    });
    if (photos.length === 0) problems.push(`vehicle ${JSON.stringify(folder)} has no photos`);
    else if (photos.length > MAX_VEHICLE_PHOTOS) problems.push(`vehicle ${JSON.stringify(folder)} has ${photos.length} photos: a vehicle takes at most ${MAX_VEHICLE_PHOTOS}`);
    photoCount += photos.length;
    vehicles.push({ folder, vehicle: contexts.get(folder) ?? {}, photos });
  }
  if (photoCount > MAX_BATCH_PHOTOS) problems.push(`${photoCount} photos: a batch takes at most ${MAX_BATCH_PHOTOS}`);
  if (problems.length) {
    throw new CliError(`refused before uploading anything:\n  ${problems.join('\n  ')}`, EXIT.USAGE, { problems });
  }
  return vehicles;
}

/**
 * The manifest: a header row naming some of folder, vin, mileage, make, model, year (any order,
 * any case; folder required), one row per vehicle folder. A byte-order mark, CRLF line ends and
 * quoted fields (commas and quotes inside) are read as spreadsheets write them (csv-parse).
 */
function readManifest(path: string, folders: Set<string>, problems: string[]): Map<string, VehicleContext> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read the manifest ${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`, EXIT.USAGE);
  }
  let rows: Array<{ record: Record<string, string>; info: { lines: number } }>;
  try {
    rows = parse(text, {
      bom: true,
      columns: (header: string[]) => header.map((h) => h.trim().toLowerCase()),
      skip_empty_lines: true,
      trim: true,
      info: true,
    }) as unknown as typeof rows;
  } catch (err) {
    throw new CliError(`cannot read the manifest ${path}: ${(err as Error).message}`, EXIT.USAGE);
  }
  const out = new Map<string, VehicleContext>();
  const header = rows[0] ? Object.keys(rows[0].record) : [];
  const unknown = header.filter((h) => !(COLUMNS as readonly string[]).includes(h));
  if (rows.length && (unknown.length || !header.includes('folder'))) {
    problems.push(`${path}: the header row names the columns ${COLUMNS.join(', ')} (folder required)${unknown.length ? `; unknown: ${unknown.map((u) => JSON.stringify(u)).join(', ')}` : ''}`);
    return out;
  }
  for (const { record, info } of rows) {
    const at = `${path} line ${info.lines}`;
    const folder = record.folder ?? '';
    const bad = (what: string) => problems.push(`${at} (${JSON.stringify(folder)}): ${what}`);
    if (!folder) {
      bad('no folder named');
      continue;
    }
    if (out.has(folder)) {
      bad('this folder has a row already');
      continue;
    }
    if (!folders.has(folder)) bad(`no folder ${JSON.stringify(folder)} in ${relative(process.cwd(), join(path, '..')) || '.'}`);
    const vehicle: VehicleContext = {};
    const vin = (record.vin ?? '').toUpperCase();
    if (vin) {
      if (VIN.test(vin)) vehicle.vin = vin;
      else bad(`bad VIN ${JSON.stringify(record.vin)}: a VIN is 17 letters and digits, without I, O or Q`);
    }
    for (const key of ['mileage', 'year'] as const) {
      const raw = record[key] ?? '';
      if (!raw) continue;
      const n = /^\d{1,8}$/.test(raw) ? Number(raw) : NaN;
      const [min, max] = key === 'mileage' ? [0, 10_000_000] : [1885, 2100];
      if (Number.isInteger(n) && n >= min && n <= max) vehicle[key] = n;
      else bad(`bad ${key} ${JSON.stringify(raw)}: a whole number from ${min} to ${max}${key === 'mileage' ? ', digits only' : ''}`);
    }
    for (const key of ['make', 'model'] as const) {
      const raw = record[key] ?? '';
      if (!raw) continue;
      if (raw.length > 100 || CONTROL.test(raw)) bad(`bad ${key}: at most 100 characters, no line breaks or control characters`);
      else vehicle[key] = raw;
    }
    out.set(folder, vehicle);
  }
  return out;
}

const preview = (names: string[]) => (names.length > 3 ? `${names.slice(0, 3).map((n) => JSON.stringify(n)).join(', ')} …` : names.map((n) => JSON.stringify(n)).join(', '));
