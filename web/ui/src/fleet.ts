/**
 * A fleet from a dropped folder: each sub-folder is a vehicle, its photos the vehicle's photos, and
 * an optional spreadsheet (CSV or XLSX; columns folder, VIN, mileage, make, model, year) says what
 * each vehicle is. Everything here runs in the browser before anything is uploaded or charged, so
 * the person sees which vehicles will run and which are refused, and why (docs/decisions.md
 * "Console vehicle batches"). The server checks the same bounds again (web/routes/batches.ts).
 */

export const MAX_VEHICLE_PHOTOS = 50;
export const MAX_VEHICLES = 1_000;
/** A VIN of ISO 3779: 17 letters and digits, without I, O and Q. */
export const VIN = /^[A-HJ-NPR-Z0-9]{17}$/;
export const IMAGE = /\.(jpe?g|png|webp|gif|avif|tiff?|heic|heif|bmp)$/i;
const SHEET = /\.(csv|xlsx)$/i;

export interface FleetFile {
  file: File;
  /** The path under the dropped folder ("fleet/van-17/front.jpg"). */
  path: string;
}

export interface Vehicle {
  key: string;
  /** The folder's name: shown in status and exports. */
  name: string;
  vin?: string;
  mileage?: number;
  make?: string;
  model?: string;
  year?: number;
  photos: FleetFile[];
  /** Why it will not be sent; undefined when it will. */
  refused?: string;
}

export interface SheetRow {
  folder: string;
  vin?: string;
  mileage?: string;
  make?: string;
  model?: string;
  year?: string;
}

const oneLine = (s: string) => s.replace(/[\r\n\t]+/g, ' ').trim();

/** The path of a chosen or dropped file under the folder (webkitRelativePath, or the drop's own). */
export const pathOf = (f: File, dropped?: string) => (dropped ?? (f.webkitRelativePath || f.name)).replace(/^\/+/, '');

/** Files a picker (or a drop without folder entries) handed over, each with its path. */
export const fleetFiles = (files: Iterable<File> | null): FleetFile[] => [...(files ?? [])].map((file) => ({ file, path: pathOf(file) }));

/**
 * Group files into vehicles: the first folder level below the dropped folder names the vehicle
 * (deeper folders count as the same vehicle). Photos lying in the dropped folder itself belong to no
 * vehicle and are reported as loose. A spreadsheet anywhere at the top is returned for reading.
 */
export function groupFleet(files: FleetFile[]): { vehicles: Vehicle[]; loose: number; sheet: File | null; skipped: number } {
  const byFolder = new Map<string, FleetFile[]>();
  let loose = 0;
  let skipped = 0;
  let sheet: File | null = null;
  for (const f of files) {
    // The dropped or chosen folder's own name comes first (webkitdirectory and a drop both give it).
    const parts = f.path.split('/').filter(Boolean);
    const [, folder, ...rest] = parts;
    if (SHEET.test(f.file.name) && parts.length <= 2) {
      sheet ??= f.file;
      continue;
    }
    if (!IMAGE.test(f.file.name) && !f.file.type.startsWith('image/')) {
      skipped++;
      continue;
    }
    if (!folder || rest.length === 0) {
      loose++;
      continue;
    }
    const list = byFolder.get(folder) ?? [];
    list.push(f);
    byFolder.set(folder, list);
  }
  const vehicles = [...byFolder.entries()]
    .sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))
    .map(([folder, photos]) => ({
      key: folder,
      name: oneLine(folder).slice(0, 200),
      // A folder named by its VIN says it.
      ...(VIN.test(folder.toUpperCase()) ? { vin: folder.toUpperCase() } : {}),
      photos: photos.sort((a, b) => a.path.localeCompare(b.path, 'en', { numeric: true })),
    }));
  return { vehicles, loose, sheet, skipped };
}

/**
 * Join the spreadsheet's rows to the folders (by folder name, case-insensitive), then decide each
 * vehicle's refusal. A row naming no folder becomes a refused vehicle of its own ("no photos").
 */
export function reviewFleet(vehicles: Vehicle[], rows: SheetRow[]): Vehicle[] {
  const out = vehicles.map((v) => ({ ...v }));
  const byName = new Map(out.map((v) => [v.key.toLowerCase(), v]));
  const problems = new Map<Vehicle, string[]>();
  const problem = (v: Vehicle, why: string) => problems.set(v, [...(problems.get(v) ?? []), why]);
  for (const row of rows) {
    const folder = oneLine(row.folder);
    let v = byName.get(folder.toLowerCase());
    if (!v) {
      v = { key: `sheet:${folder}`, name: folder.slice(0, 200) || '(no folder named)', photos: [] };
      out.push(v);
      byName.set(folder.toLowerCase(), v);
    }
    if (row.vin?.trim()) {
      const vin = row.vin.trim().toUpperCase();
      v.vin = vin;
    }
    if (row.mileage?.trim()) {
      const m = Number(row.mileage.replace(/[\s,_]/g, ''));
      if (Number.isInteger(m) && m >= 0 && m <= 10_000_000) v.mileage = m;
      else problem(v, `mileage "${oneLine(row.mileage).slice(0, 20)}" is not a whole number of km or miles`);
    }
    if (row.year?.trim()) {
      const y = Number(row.year.trim());
      if (Number.isInteger(y) && y >= 1885 && y <= 2100) v.year = y;
      else problem(v, `year "${oneLine(row.year).slice(0, 10)}" is not a model year`);
    }
    if (row.make?.trim()) v.make = oneLine(row.make).slice(0, 100);
    if (row.model?.trim()) v.model = oneLine(row.model).slice(0, 100);
  }
  for (const v of out) {
    if (v.photos.length === 0) problem(v, 'no photos in its folder');
    if (v.photos.length > MAX_VEHICLE_PHOTOS) problem(v, `${v.photos.length} photos; a vehicle takes at most ${MAX_VEHICLE_PHOTOS}`);
    if (v.vin !== undefined && !VIN.test(v.vin)) problem(v, `VIN "${oneLine(v.vin).slice(0, 30)}" is not 17 letters and digits (no I, O or Q)`);
    const p = problems.get(v);
    if (p) v.refused = p.join('; ');
    else delete v.refused;
  }
  return out;
}

const HEADERS: Record<string, keyof SheetRow> = { folder: 'folder', vin: 'vin', mileage: 'mileage', make: 'make', model: 'model', year: 'year' };

/** Rows by their header names (folder, VIN, mileage, make, model, year; any order, any case). */
function rowsOf(table: string[][]): SheetRow[] {
  const [head, ...body] = table;
  if (!head) return [];
  const cols = head.map((h) => HEADERS[h.trim().toLowerCase()]);
  if (!cols.includes('folder')) throw new Error('The spreadsheet needs a "folder" column (and any of VIN, mileage, make, model, year)');
  return body
    .filter((r) => r.some((c) => c.trim() !== ''))
    .map((r) => {
      const row: SheetRow = { folder: '' };
      cols.forEach((c, i) => {
        if (c) row[c] = r[i] ?? '';
      });
      return row;
    });
}

/** RFC 4180 CSV (quoted fields, doubled quotes, CRLF or LF), comma or semicolon separated. */
export function parseCsv(text: string): string[][] {
  const src = text.replace(/^\uFEFF/, '');
  const firstLine = src.split(/\r?\n/, 1)[0] ?? '';
  const sep = (firstLine.match(/;/g)?.length ?? 0) > (firstLine.match(/,/g)?.length ?? 0) ? ';' : ',';
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < src.length; i++) {
    const ch = src[i]!;
    if (quoted) {
      if (ch === '"' && src[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === sep) {
      row.push(cell);
      cell = '';
    } else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && src[i + 1] === '\n') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += ch;
  }
  if (cell !== '' || row.length) rows.push([...row, cell]);
  return rows;
}

/** The entries of a zip archive (XLSX is one), inflated by the browser's own DecompressionStream. */
async function unzip(bytes: Uint8Array, wanted: (name: string) => boolean): Promise<Map<string, string>> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let eocd = -1;
  for (let i = bytes.length - 22; i >= Math.max(0, bytes.length - 65_557); i--) {
    if (view.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('Not an XLSX file (no zip directory)');
  const count = view.getUint16(eocd + 10, true);
  let at = view.getUint32(eocd + 16, true);
  const out = new Map<string, string>();
  for (let k = 0; k < count && at + 46 <= bytes.length; k++) {
    if (view.getUint32(at, true) !== 0x02014b50) break;
    const method = view.getUint16(at + 10, true);
    const size = view.getUint32(at + 20, true);
    const nameLen = view.getUint16(at + 28, true);
    const extra = view.getUint16(at + 30, true);
    const comment = view.getUint16(at + 32, true);
    const local = view.getUint32(at + 42, true);
    const name = new TextDecoder().decode(bytes.subarray(at + 46, at + 46 + nameLen));
    at += 46 + nameLen + extra + comment;
    if (!wanted(name)) continue;
    const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
    const data = bytes.subarray(start, start + size);
    if (size > 20 * 1024 * 1024) throw new Error('The spreadsheet is too large');
    const raw = method === 0 ? data : new Uint8Array(await new Response(new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream('deflate-raw'))).arrayBuffer());
    out.set(name, new TextDecoder().decode(raw));
  }
  return out;
}

/** The first worksheet of an XLSX file as a table of strings (shared and inline strings, numbers). */
export async function parseXlsx(bytes: Uint8Array): Promise<string[][]> {
  const files = await unzip(bytes, (n) => n === 'xl/sharedStrings.xml' || /^xl\/worksheets\/sheet\d+\.xml$/.test(n));
  const sheetName = [...files.keys()].filter((n) => n.startsWith('xl/worksheets/')).sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))[0];
  if (!sheetName) throw new Error('The XLSX file has no worksheet');
  const xml = (text: string) => new DOMParser().parseFromString(text, 'application/xml');
  const shared = files.has('xl/sharedStrings.xml') ? [...xml(files.get('xl/sharedStrings.xml')!).getElementsByTagName('si')].map((si) => [...si.getElementsByTagName('t')].map((t) => t.textContent ?? '').join('')) : [];
  const table: string[][] = [];
  for (const r of xml(files.get(sheetName)!).getElementsByTagName('row')) {
    const row: string[] = [];
    for (const c of r.getElementsByTagName('c')) {
      const ref = c.getAttribute('r') ?? '';
      const letters = /^[A-Z]+/.exec(ref)?.[0] ?? '';
      const col = letters ? [...letters].reduce((n, ch) => n * 26 + ch.charCodeAt(0) - 64, 0) - 1 : row.length;
      const type = c.getAttribute('t');
      const v = c.getElementsByTagName('v')[0]?.textContent ?? '';
      const value = type === 's' ? (shared[Number(v)] ?? '') : type === 'inlineStr' ? [...c.getElementsByTagName('t')].map((t) => t.textContent ?? '').join('') : v;
      while (row.length < col) row.push('');
      row[col] = value;
    }
    table.push(row);
  }
  return table;
}

/** The spreadsheet's rows, whichever of the two formats it is. */
export async function readSheet(file: File): Promise<SheetRow[]> {
  if (file.size > 20 * 1024 * 1024) throw new Error('The spreadsheet is over 20 MB');
  if (/\.xlsx$/i.test(file.name)) return rowsOf(await parseXlsx(new Uint8Array(await file.arrayBuffer())));
  return rowsOf(parseCsv(await file.text()));
}
