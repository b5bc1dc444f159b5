import { describe, expect, it } from 'vitest';
import { getLens } from '../../lenses/index.ts';
import { vehiclePhoto, type VehiclePhotoOutput } from '../../lenses/vehicle-photo.ts';
import { assembleReportPhotos, reindexReport, withCallerVehicle, withinPhotos, type ReportPhoto } from '../../lenses/vehicle-report-photos.ts';

const finding = (view: VehiclePhotoOutput['view'], usable = true): VehiclePhotoOutput => ({
  ...structuredClone(vehiclePhoto.fixture),
  view,
  vehicleVisible: true,
  quality: { usable, score: 0.8, issues: [] },
  visibleDamage: [{ component: 'front-bumper', type: 'scratch', severity: 'minor', description: 'long scratch', confidence: 0.9 }],
  notes: ['clean'],
});
const modelEntry = (index: number, view: ReportPhoto['view'] = 'front'): ReportPhoto => ({ index, view, angle: { elevation: 'eye-level', distance: 'full-vehicle' }, usable: true, observations: [`model saw ${index}`] });

describe('a vehicle report has one photos entry per submitted photo, whatever the model answered', () => {
  const views = ['front', 'rear', 'left', 'right', 'trunk', 'roof'] as const;
  const findings = views.map((v, index) => ({ index, findings: finding(v, v !== 'roof') }));

  it('one entry for six photos becomes six, in order; the missing five come from the per-photo pass', () => {
    const { photos, filled } = assembleReportPhotos([modelEntry(2, 'left')], findings);
    expect(photos.map((p) => p.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(filled).toEqual([0, 1, 3, 4, 5]);
    expect(photos[2]).toEqual(modelEntry(2, 'left'));
    expect(photos.map((p) => p.view)).toEqual(['front', 'rear', 'left', 'right', 'trunk', 'roof']);
    expect(photos[5]!.usable).toBe(false);
    expect(photos[0]!.observations).toEqual(['front-bumper: long scratch', 'clean']);
    // Each entry is what the lens's schema allows.
    const entrySchema = (getLens('vehicle-condition').output as unknown as { shape: { photos: { element: { safeParse(v: unknown): { success: boolean } } } } }).shape.photos.element;
    for (const p of photos) expect(entrySchema.safeParse(p).success).toBe(true);
  });

  it('duplicates keep the first, out-of-range and negative positions are dropped, extra entries cut', () => {
    const { photos } = assembleReportPhotos([modelEntry(1, 'rear'), modelEntry(1, 'roof'), modelEntry(9), modelEntry(-1), ...findings.map((f) => modelEntry(f.index))], findings.slice(0, 3));
    expect(photos.map((p) => [p.index, p.view])).toEqual([[0, 'front'], [1, 'rear'], [2, 'front']]);
    expect(photos[0]!.observations).toEqual(['model saw 0']);
  });

  it('a photo without findings still gets an entry, marked unusable', () => {
    const { photos } = assembleReportPhotos([], [{ index: 0, findings: null }]);
    expect(photos).toEqual([{ index: 0, view: 'other', angle: { elevation: 'eye-level', distance: 'medium' }, usable: false, observations: ['No findings were made for this photo'] }]);
  });
});

describe('a stored report answering the same photos in another order speaks of the new positions', () => {
  const stored = {
    photos: [modelEntry(0, 'front'), modelEntry(1, 'rear'), modelEntry(2, 'left')],
    observations: [{ component: 'hood', photoIndexes: [0, 2] }],
    accidentIndicators: { likelihood: 0.2, indicators: [{ type: 'panel-gap', photoIndexes: [1] }] },
    photoQuality: { rating: 'good', usablePhotoCount: 3, issues: [{ photoIndex: 2, issue: 'blurry' }] },
    vehicleContext: { make: 'VW', mismatches: [{ field: 'color', photoIndexes: [0] }] },
  };

  it('reversed: every position is rewritten', () => {
    const out = reindexReport(stored, ['a', 'b', 'c'], ['c', 'b', 'a']) as typeof stored;
    expect(out.photos.map((p) => [p.index, p.view])).toEqual([[0, 'left'], [1, 'rear'], [2, 'front']]);
    expect(out.observations).toEqual([{ component: 'hood', photoIndexes: [0, 2] }]);
    expect(out.accidentIndicators.indicators).toEqual([{ type: 'panel-gap', photoIndexes: [1] }]);
    expect(out.photoQuality.issues).toEqual([{ photoIndex: 0, issue: 'blurry' }]);
    expect(out.vehicleContext.mismatches).toEqual([{ field: 'color', photoIndexes: [2] }]);
  });

  it('a photo sent twice appears at both positions', () => {
    const out = reindexReport(stored, ['a', 'b', 'c'], ['b', 'a', 'c', 'a']) as typeof stored;
    expect(out.photos.map((p) => [p.index, p.view])).toEqual([[0, 'rear'], [1, 'front'], [2, 'left'], [3, 'front']]);
    expect(out.observations[0]!.photoIndexes).toEqual([1, 2, 3]);
    expect(out.vehicleContext.mismatches[0]!.photoIndexes).toEqual([1, 3]);
  });

  it('the same order is the stored report untouched', () => {
    expect(reindexReport(stored, ['a', 'b', 'c'], ['a', 'b', 'c'])).toBe(stored);
  });
});

describe('positions outside the request are dropped', () => {
  it('photoIndexes and photoIndex at or past the photo count go', () => {
    const out = withinPhotos(
      {
        observations: [{ component: 'hood', photoIndexes: [0, 2, 7] }],
        accidentIndicators: { likelihood: 0.1, indicators: [{ type: 'panel-gap', photoIndexes: [5] }] },
        photoQuality: { rating: 'good', usablePhotoCount: 3, issues: [{ photoIndex: 1, issue: 'blurry' }, { photoIndex: 3, issue: 'too-dark' }] },
        vehicleContext: { mismatches: [{ field: 'color', photoIndexes: [1, 9] }] },
      },
      3,
    ) as Record<string, any>;
    expect(out.observations[0].photoIndexes).toEqual([0, 2]);
    expect(out.accidentIndicators.indicators[0].photoIndexes).toEqual([]);
    expect(out.photoQuality.issues).toEqual([{ photoIndex: 1, issue: 'blurry' }]);
    expect(out.vehicleContext.mismatches[0].photoIndexes).toEqual([1]);
  });
});

describe('the caller’s vehicle data in the report', () => {
  const report = () => structuredClone(getLens('vehicle-condition').fixture) as unknown as Record<string, unknown> & { vehicleContext: Record<string, unknown> & { sources: Array<{ field: string; source: string }> } };

  it('keeps what the caller gave over the model’s reading, fills nothing else, and says where each value came from', () => {
    const model = report();
    model.vehicleContext = { ...model.vehicleContext, vin: 'MODEL-INVENTED', mileage: 999, make: 'Fiat', color: 'red', sources: [{ field: 'vin', source: 'photos' }, { field: 'mileage', source: 'context-confirmed' }, { field: 'color', source: 'photos' }] };
    const out = withCallerVehicle(model, { vin: 'WVWZZZ1JZ3W386752', mileage: 120_000 }).vehicleContext as typeof model.vehicleContext;
    expect(out).toMatchObject({ vin: 'WVWZZZ1JZ3W386752', mileage: 120_000, make: 'Fiat', color: 'red' });
    expect(out.sources).toEqual([
      { field: 'color', source: 'photos' },
      { field: 'vin', source: 'context' },
      { field: 'mileage', source: 'context-confirmed' },
    ]);
    expect(getLens('vehicle-condition').output.safeParse({ ...model, vehicleContext: out }).success).toBe(true);
  });

  it('leaves the report alone when the caller gave no vehicle data', () => {
    const model = report();
    expect(withCallerVehicle(model, undefined)).toBe(model);
    expect(withCallerVehicle(model, {})).toBe(model);
  });
});
