import type { VehiclePhotoOutput } from './vehicle-photo.ts';

/** One entry of the vehicle-condition report's `photos` array. */
export interface ReportPhoto {
  index: number;
  view: VehiclePhotoOutput['view'];
  angle: VehiclePhotoOutput['angle'];
  usable: boolean;
  observations: string[];
}

/** What the first pass said about one photo, as a report entry. */
function fromFindings(index: number, f: VehiclePhotoOutput | null): ReportPhoto {
  if (!f) return { index, view: 'other', angle: { elevation: 'eye-level', distance: 'medium' }, usable: false, observations: ['No findings were made for this photo'] };
  const observations = [...f.visibleDamage.map((d) => `${d.component}: ${d.description}`), ...f.notes].slice(0, 5);
  return { index, view: f.view, angle: f.angle, usable: f.vehicleVisible && f.quality.usable, observations };
}

/**
 * Exactly one `photos` entry per submitted photo, in submission order, whatever the model
 * answered: the model's entry for a position is kept when it gave one (its first, if it gave
 * several); a position it left out, or gave out of range, is filled from that photo's own findings
 * of the per-photo pass. The model's count is never trusted: six photos give six entries.
 * (Array bounds in the schema would not do: a short answer would fail validation and cost a
 * repair call or a fallback vendor for something the first pass already knows.)
 */
export function assembleReportPhotos(
  modelPhotos: readonly ReportPhoto[],
  findings: ReadonlyArray<{ index: number; findings: VehiclePhotoOutput | null }>,
): { photos: ReportPhoto[]; filled: number[] } {
  const byIndex = new Map<number, ReportPhoto>();
  for (const p of modelPhotos) if (p.index >= 0 && p.index < findings.length && !byIndex.has(p.index)) byIndex.set(p.index, p);
  const filled: number[] = [];
  const photos = findings.map((f, index) => {
    const given = byIndex.get(index);
    if (given) return given;
    filled.push(index);
    return fromFindings(index, f.findings);
  });
  return { photos, filled };
}

export type Report = Record<string, unknown> & { photos?: ReportPhoto[] };

/**
 * A stored report answering a request with the same photos in another order (or repeated): every
 * photo position in it is rewritten to the request's own, so `photos` again has one entry per
 * submitted photo in submission order, and each `photoIndexes` / `photoIndex` names the positions
 * where that photo sits in this request. `storedShas` are the photos in the order the report was
 * written for.
 */
export function reindexReport(output: Report, storedShas: readonly string[], requestShas: readonly string[]): Report {
  if (storedShas.length === requestShas.length && storedShas.every((s, i) => s === requestShas[i])) return output;
  const positions = new Map<string, number[]>();
  requestShas.forEach((sha, j) => positions.set(sha, [...(positions.get(sha) ?? []), j]));
  const to = (i: number): number[] => (storedShas[i] === undefined ? [] : (positions.get(storedShas[i]!) ?? []));
  const many = (indexes: unknown): number[] => [...new Set((Array.isArray(indexes) ? indexes : []).flatMap((i: number) => to(i)))].sort((a, b) => a - b);
  const stored = output.photos ?? [];
  const photos = requestShas.map((sha, j) => {
    const i = storedShas.indexOf(sha);
    const entry = stored.find((p) => p.index === i);
    return entry ? { ...entry, index: j } : fromFindings(j, null);
  });
  const mapList = (list: unknown, key: string, single = false): Array<Record<string, unknown>> =>
    (Array.isArray(list) ? (list as Array<Record<string, unknown>>) : []).flatMap((item): Array<Record<string, unknown>> =>
      single ? to(item[key] as number).map((j) => ({ ...item, [key]: j })) : [{ ...item, [key]: many(item[key]) }],
    );
  const next: Report = { ...output, photos };
  if (Array.isArray(output.observations)) next.observations = mapList(output.observations, 'photoIndexes');
  const ai = output.accidentIndicators as { indicators?: unknown } | undefined;
  if (ai && Array.isArray(ai.indicators)) next.accidentIndicators = { ...ai, indicators: mapList(ai.indicators, 'photoIndexes') };
  const pq = output.photoQuality as { issues?: unknown } | undefined;
  if (pq && Array.isArray(pq.issues)) next.photoQuality = { ...pq, issues: mapList(pq.issues, 'photoIndex', true) };
  const vc = output.vehicleContext as { mismatches?: unknown } | undefined;
  if (vc && Array.isArray(vc.mismatches)) next.vehicleContext = { ...vc, mismatches: mapList(vc.mismatches, 'photoIndexes') };
  return next;
}

/**
 * Positions the model named that are not photos of this request (≥ the photo count) are dropped,
 * so a live report and the same report served again from the registry in another order say the
 * same thing.
 */
export function withinPhotos(report: Report, photoCount: number): Report {
  const keep = (indexes: unknown) => (Array.isArray(indexes) ? indexes.filter((i: number) => i >= 0 && i < photoCount) : []);
  const next: Report = { ...report };
  if (Array.isArray(report.observations)) next.observations = (report.observations as Array<Record<string, unknown>>).map((o) => ({ ...o, photoIndexes: keep(o.photoIndexes) }));
  const ai = report.accidentIndicators as { indicators?: Array<Record<string, unknown>> } | undefined;
  if (ai && Array.isArray(ai.indicators)) next.accidentIndicators = { ...ai, indicators: ai.indicators.map((x) => ({ ...x, photoIndexes: keep(x.photoIndexes) })) };
  const pq = report.photoQuality as { issues?: Array<{ photoIndex: number }> } | undefined;
  if (pq && Array.isArray(pq.issues)) next.photoQuality = { ...pq, issues: pq.issues.filter((x) => x.photoIndex >= 0 && x.photoIndex < photoCount) };
  const vc = report.vehicleContext as { mismatches?: Array<Record<string, unknown>> } | undefined;
  if (vc && Array.isArray(vc.mismatches)) next.vehicleContext = { ...vc, mismatches: vc.mismatches.map((m) => ({ ...m, photoIndexes: keep(m.photoIndexes) })) };
  return next;
}

type CallerVehicle = Partial<Record<'vin' | 'mileage' | 'year' | 'make' | 'model', string | number>>;

/**
 * The caller's vehicle data in the report as the caller gave it: the model is asked to echo it and
 * may only fill the fields the caller left out (from legible VIN plates and odometers). A value
 * the caller gave is never replaced by the model's reading; where the photos disagree, that is
 * what `mismatches` records. Each given field's source says `context` (or `context-confirmed`
 * when the model said the photos confirm it).
 */
export function withCallerVehicle(report: Report, vehicle: CallerVehicle | undefined): Report {
  const given = Object.entries(vehicle ?? {}).filter(([, v]) => v !== undefined) as Array<[keyof CallerVehicle, string | number]>;
  if (!given.length) return report;
  const vc = { make: null, model: null, year: null, vin: null, mileage: null, mileageUnit: null, color: null, sources: [], mismatches: [], ...(report.vehicleContext as Record<string, unknown> | undefined) } as Record<string, unknown> & {
    sources: Array<{ field: string; source: string }>;
  };
  const sources = vc.sources.filter((s) => !given.some(([field]) => field === s.field));
  for (const [field, value] of given) {
    vc[field] = value;
    const said = vc.sources.find((s) => s.field === field)?.source;
    sources.push({ field, source: said === 'context-confirmed' ? 'context-confirmed' : 'context' });
  }
  return { ...report, vehicleContext: { ...vc, sources } };
}
